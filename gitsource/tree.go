package gitsource

import (
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/tend-dev/tend/manifest"
)

// cleanPath turns the configured folder into a clean repo-relative path,
// "" for the repository root. It rejects absolute paths and paths that climb
// out of the repository.
func cleanPath(p string) (string, error) {
	p = strings.ReplaceAll(p, "\\", "/")
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q must be relative to the repository root", p)
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return "", fmt.Errorf("path %q must not contain \"..\"", p)
		}
	}
	p = path.Clean(p)
	if p == "." {
		return "", nil
	}
	return p, nil
}

// readFiles returns every regular *.yaml/*.yml file under dir in commit,
// recursively, sorted by path. Symlinks and submodules are skipped: their
// targets are not in this tree.
func readFiles(commit *object.Commit, dir, shown string) ([]File, error) {
	rev := commit.Hash.String()[:12]
	root, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s at %s: %w", shown, rev, err)
	}
	tree := root
	if dir != "" {
		tree, err = root.Tree(dir)
		if errors.Is(err, object.ErrDirectoryNotFound) {
			if e, ferr := root.FindEntry(dir); ferr == nil && e.Mode.IsFile() {
				return nil, notFound(ErrPathNotFound, "path %q is a file, not a folder, in %s at %s", dir, shown, rev)
			}
			return nil, notFound(ErrPathNotFound, "path %q not found in %s at %s", dir, shown, rev)
		}
		if err != nil {
			return nil, fmt.Errorf("read %q in %s at %s: %w", dir, shown, rev, err)
		}
	}

	files, err := TreeFiles(tree, dir)
	if err != nil {
		return nil, fmt.Errorf("read files under %q in %s at %s: %w", dir, shown, rev, err)
	}
	if len(files) == 0 {
		return nil, notFound(ErrPathNotFound, "no *.yaml or *.yml files under %q in %s at %s", displayDir(dir), shown, rev)
	}
	return files, nil
}

// TreeFiles returns every regular *.yaml/*.yml file under tree,
// recursively, named dir/<path in tree> and sorted by that name. Symlinks
// and submodules are skipped: their targets are not in this tree.
func TreeFiles(tree *object.Tree, dir string) ([]File, error) {
	var files []File
	err := tree.Files().ForEach(func(f *object.File) error {
		if !manifest.IsManifest(f.Name) || (f.Mode != filemode.Regular && f.Mode != filemode.Executable) {
			return nil
		}
		if err := manifest.CheckSize(path.Join(dir, f.Name), f.Size); err != nil {
			return err
		}
		r, err := f.Reader()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return err
		}
		files = append(files, File{Path: path.Join(dir, f.Name), Data: data})
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, err
}

func displayDir(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}
