package applier

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// openAllowed opens an os.Root at the allowed directory allow under the
// driver's root. It walks down one directory at a time and refuses a
// symlink at any step, so that a link such as /etc/infer → /etc cannot
// widen what tend may write. With create, missing directories are made
// (mode 0755); without, a missing one is an error matching fs.ErrNotExist.
func (d *FileDriver) openAllowed(allow string, create bool) (*os.Root, error) {
	r, err := os.OpenRoot(d.root)
	if err != nil {
		return nil, fmt.Errorf("open root %s: %w", d.root, unwrapPath(err))
	}
	if allow == "/" {
		return r, nil
	}
	walked := ""
	for _, name := range strings.Split(allow[1:], "/") {
		walked += "/" + name
		next, err := d.openChild(r, name, walked, create)
		_ = r.Close()
		if err != nil {
			return nil, err
		}
		r = next
	}
	return r, nil
}

// openChild opens directory name inside r without following a symlink.
// walked is its path under the driver's root, for messages.
func (d *FileDriver) openChild(r *os.Root, name, walked string, create bool) (*os.Root, error) {
	fi, err := r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := makeDir(r, name); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		fi, err = r.Lstat(name)
	}
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", d.nodePath(walked), unwrapPath(err))
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%w: %s is a symlink; tend follows no symlink from root down to an allowed path: "+
			"make it a real directory, or allow the path it points to", ErrSymlinkEscape, d.nodePath(walked))
	case !fi.IsDir():
		return nil, fmt.Errorf("%s is not a directory; tend needs one there for allowed path files: move it away",
			d.nodePath(walked))
	}
	child, err := r.OpenRoot(name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", d.nodePath(walked), unwrapPath(err))
	}
	// Between Lstat and OpenRoot the directory could have been swapped
	// for a symlink; make sure what was opened is what was checked.
	st, err := child.Stat(".")
	if err != nil || !os.SameFile(fi, st) {
		_ = child.Close()
		return nil, fmt.Errorf("%w: %s changed while tend opened it; try again", ErrSymlinkEscape, d.nodePath(walked))
	}
	return child, nil
}

// escapes reports whether err is os.Root refusing a path that leaves it,
// which the os package does not export as a sentinel.
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// confined marks err as a symlink escape when os.Root refused a path inside
// allow because a symlink leads out of it.
func confined(allow string, err error) error {
	if escapes(err) && !errors.Is(err, ErrSymlinkEscape) {
		return fmt.Errorf("%w: a symlink under %s points outside it: %w", ErrSymlinkEscape, allow, err)
	}
	return err
}

// mkdirs creates the directories of rel (a relative, clean directory path)
// inside r that are missing, with mode 0755 whatever the umask. Symlinks
// inside r are followed as os.Root allows: never out of r.
func mkdirs(r *os.Root, rel string) error {
	if rel == "." || rel == "" {
		return nil
	}
	walked := ""
	for _, name := range strings.Split(rel, "/") {
		walked = path.Join(walked, name)
		err := makeDir(r, walked)
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, err := r.Stat(walked)
		if err != nil {
			return fmt.Errorf("stat %s: %w", path.Join(r.Name(), walked), unwrapPath(err))
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory; tend needs one there: move it away or declare another path",
				path.Join(r.Name(), walked))
		}
	}
	return nil
}

// makeDir creates directory name inside r with mode 0755 exactly and makes
// its entry durable. An existing entry is an error matching fs.ErrExist.
func makeDir(r *os.Root, name string) error {
	if err := r.Mkdir(name, dirMode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("create directory %s: %w", path.Join(r.Name(), name), unwrapPath(err))
	}
	if err := r.Chmod(name, dirMode); err != nil {
		return fmt.Errorf("chmod %s: %w", path.Join(r.Name(), name), unwrapPath(err))
	}
	return syncDir(r, path.Dir(name))
}
