package gitsource

import (
	"errors"
	"fmt"
	"io"
	"path"
	"sort"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/source"
)

// readFiles returns every regular *.yaml/*.yml file under each of dirs in
// commit, recursively, each once (paths may overlap), sorted by path. A
// file is PerDevice when a PerDevice path reaches it. Symlinks and
// submodules are skipped: their targets are not in this tree.
//
// With no file under any path, the error is source.ErrPathNotFound. Otherwise a
// path that is not in the commit is an error (source.ErrSharedPathNotFound)
// unless it is PerDevice: a device may have no folder of its own and take
// everything from the shared paths, but a shared path that is missing is a
// typo or a deleted folder, which would silently drop what it held.
func readFiles(commit *object.Commit, dirs []source.Path, shown string) ([]source.File, error) {
	rev := commit.Hash.String()[:12]
	root, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s at %s: %w", shown, rev, err)
	}
	return source.Collect(dirs, shown, rev, func(d source.Path) ([]source.File, error) {
		tree, err := subtree(root, d.Dir, shown, rev)
		if err != nil {
			return nil, err
		}
		found, err := TreeFiles(tree, d.Dir)
		if err != nil {
			return nil, fmt.Errorf("read files under %q in %s at %s: %w", displayDir(d.Dir), shown, rev, err)
		}
		return found, nil
	})
}

// CommitFiles returns the manifest files under paths in commit, as Fetch
// reads them (see Snapshot.Files); shown names the commit in errors.
func CommitFiles(commit *object.Commit, paths []source.Path, shown string) ([]source.File, error) {
	dirs, err := source.CleanPaths(paths)
	if err != nil {
		return nil, err
	}
	return readFiles(commit, dirs, shown)
}

// subtree returns the folder dir of root ("" for root itself); a folder
// that is not there, or is a file, is source.ErrPathNotFound.
func subtree(root *object.Tree, dir, shown, rev string) (*object.Tree, error) {
	if dir == "" {
		return root, nil
	}
	tree, err := root.Tree(dir)
	if errors.Is(err, object.ErrDirectoryNotFound) {
		if e, ferr := root.FindEntry(dir); ferr == nil && e.Mode.IsFile() {
			return nil, notFound(source.ErrPathNotFound, "path %q is a file, not a folder, in %s at %s", dir, shown, rev)
		}
		return nil, notFound(source.ErrPathNotFound, "path %q not found in %s at %s", dir, shown, rev)
	}
	if err != nil {
		return nil, fmt.Errorf("read %q in %s at %s: %w", dir, shown, rev, err)
	}
	return tree, nil
}

// TreeFiles returns every regular *.yaml/*.yml file under tree,
// recursively, named dir/<path in tree> and sorted by that name. Symlinks
// and submodules are skipped: their targets are not in this tree.
func TreeFiles(tree *object.Tree, dir string) ([]source.File, error) {
	var files []source.File
	var budget manifest.ReadBudget
	err := tree.Files().ForEach(func(f *object.File) error {
		if !manifest.IsManifest(f.Name) || (f.Mode != filemode.Regular && f.Mode != filemode.Executable) {
			return nil
		}
		if err := budget.Take(path.Join(dir, f.Name), f.Size); err != nil {
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
		files = append(files, source.File{Path: path.Join(dir, f.Name), Data: data})
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
