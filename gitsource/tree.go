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

// cleanPaths cleans the Dir of every path (see cleanPath).
func cleanPaths(paths []Path) ([]Path, error) {
	out := make([]Path, len(paths))
	for i, p := range paths {
		dir, err := cleanPath(p.Dir)
		if err != nil {
			return nil, err
		}
		out[i] = Path{Dir: dir, PerDevice: p.PerDevice}
	}
	return out, nil
}

// readFiles returns every regular *.yaml/*.yml file under each of dirs in
// commit, recursively, each once (paths may overlap), sorted by path. A
// file is PerDevice when a PerDevice path reaches it. Symlinks and
// submodules are skipped: their targets are not in this tree.
//
// With no file under any path, the error is ErrPathNotFound. Otherwise a
// path that is not in the commit is an error (ErrSharedPathNotFound)
// unless it is PerDevice: a device may have no folder of its own and take
// everything from the shared paths, but a shared path that is missing is a
// typo or a deleted folder, which would silently drop what it held.
func readFiles(commit *object.Commit, dirs []Path, shown string) ([]File, error) {
	rev := commit.Hash.String()[:12]
	root, err := commit.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s at %s: %w", shown, rev, err)
	}
	return collect(dirs, shown, rev, func(d Path) ([]File, error) {
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

// collect gathers the files read reads under each of dirs, each once,
// sorted by path, with the rules of readFiles; read returns an error
// wrapping ErrPathNotFound for a folder that is not there.
func collect(dirs []Path, shown, rev string, read func(Path) ([]File, error)) ([]File, error) {
	byPath := map[string]int{}
	var files []File
	var missing []error
	var shared []string // missing paths without {device}
	for _, d := range dirs {
		found, err := read(d)
		if errors.Is(err, ErrPathNotFound) {
			missing = append(missing, err)
			if !d.PerDevice {
				shared = append(shared, d.Dir)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, f := range found {
			f.PerDevice = d.PerDevice
			if i, ok := byPath[f.Path]; ok {
				files[i].PerDevice = files[i].PerDevice || f.PerDevice
				continue
			}
			byPath[f.Path] = len(files)
			files = append(files, f)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	switch {
	case len(files) == 0 && len(dirs) == 1 && len(missing) == 1:
		return nil, missing[0]
	case len(files) == 0:
		return nil, notFound(ErrPathNotFound, "no *.yaml or *.yml files under %s in %s at %s", displayDirs(dirs), shown, rev)
	case len(shared) > 0:
		return nil, notFound(ErrSharedPathNotFound, "source path %s not found in %s at %s: a path without {device} must exist "+
			"(a misspelt or deleted folder would drop what it holds from every device); fix source.paths or restore the folder",
			quoteDirs(shared), shown, rev)
	}
	return files, nil
}

// CommitFiles returns the manifest files under paths in commit, as Fetch
// reads them (see Snapshot.Files); shown names the commit in errors.
func CommitFiles(commit *object.Commit, paths []Path, shown string) ([]File, error) {
	dirs, err := cleanPaths(paths)
	if err != nil {
		return nil, err
	}
	return readFiles(commit, dirs, shown)
}

// subtree returns the folder dir of root ("" for root itself); a folder
// that is not there, or is a file, is ErrPathNotFound.
func subtree(root *object.Tree, dir, shown, rev string) (*object.Tree, error) {
	if dir == "" {
		return root, nil
	}
	tree, err := root.Tree(dir)
	if errors.Is(err, object.ErrDirectoryNotFound) {
		if e, ferr := root.FindEntry(dir); ferr == nil && e.Mode.IsFile() {
			return nil, notFound(ErrPathNotFound, "path %q is a file, not a folder, in %s at %s", dir, shown, rev)
		}
		return nil, notFound(ErrPathNotFound, "path %q not found in %s at %s", dir, shown, rev)
	}
	if err != nil {
		return nil, fmt.Errorf("read %q in %s at %s: %w", dir, shown, rev, err)
	}
	return tree, nil
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

// displayDirs names the folders of dirs: "devices/cam-017" for one,
// "any of profiles, devices/cam-017" for several.
func displayDirs(dirs []Path) string {
	if len(dirs) == 1 {
		return fmt.Sprintf("%q", displayDir(dirs[0].Dir))
	}
	names := make([]string, len(dirs))
	for i, d := range dirs {
		names[i] = displayDir(d.Dir)
	}
	return "any of " + strings.Join(names, ", ")
}

// quoteDirs names folders: "profiles" for one, "a", "b" for several.
func quoteDirs(dirs []string) string {
	q := make([]string, len(dirs))
	for i, d := range dirs {
		q[i] = fmt.Sprintf("%q", displayDir(d))
	}
	return strings.Join(q, ", ")
}
