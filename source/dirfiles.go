package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/tend-dev/tend/internal/errkind"
	"github.com/tend-dev/tend/manifest"
)

// DirFiles returns the manifest files under paths in an unpacked tree of
// the fleet repo (a published artifact, see package ocisource), as
// gitsource reads them from a commit: every regular *.yaml/*.yml file
// under each path, once, sorted, with Collect's rules for a missing path. As in a
// commit, symlinks are skipped and never followed, not even as a parent
// folder of a path; shown and rev name the tree in errors.
func DirFiles(root *os.Root, paths []Path, shown, rev string) ([]File, error) {
	dirs, err := CleanPaths(paths)
	if err != nil {
		return nil, err
	}
	return Collect(dirs, shown, rev, func(d Path) ([]File, error) {
		if err := realDir(root, d.Dir, shown, rev); err != nil {
			return nil, err
		}
		start := d.Dir
		if start == "" {
			start = "."
		}
		var files []File
		var budget manifest.ReadBudget
		err := fs.WalkDir(root.FS(), start, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p != start && strings.HasPrefix(e.Name(), ".") {
				if e.IsDir() {
					return fs.SkipDir // .github/, .old/: skipped as in a commit
				}
				return nil
			}
			if !e.Type().IsRegular() || !manifest.IsManifest(e.Name()) {
				return nil
			}
			fi, err := e.Info()
			if err != nil {
				return err
			}
			if err := budget.Take(p, fi.Size()); err != nil {
				return err
			}
			data, err := root.ReadFile(p)
			if err != nil {
				return err
			}
			files = append(files, File{Path: p, Data: data})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read files under %q in %s at %s: %w", displayDir(d.Dir), shown, rev, err)
		}
		sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
		return files, nil
	})
}

// realDir checks that dir ("" for the root) is a folder of root reached
// through real folders only; anything else is ErrPathNotFound, as a
// commit's tree has no folder behind a symlink.
func realDir(root *os.Root, dir, shown, rev string) error {
	if dir == "" {
		return nil
	}
	p := ""
	for _, c := range strings.Split(dir, "/") {
		p = path.Join(p, c)
		fi, err := root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return errkind.New(ErrPathNotFound, "path %q not found in %s at %s", dir, shown, rev)
		case err != nil:
			return fmt.Errorf("read %q in %s at %s: %w", dir, shown, rev, err)
		case p == dir && fi.Mode().IsRegular():
			return errkind.New(ErrPathNotFound, "path %q is a file, not a folder, in %s at %s", dir, shown, rev)
		case !fi.IsDir():
			return errkind.New(ErrPathNotFound, "path %q not found in %s at %s", dir, shown, rev)
		}
	}
	return nil
}
