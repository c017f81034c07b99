package confine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/manifest"
)

// Tree is the part of a node tend may write: the allowed paths under root.
// Every managed path p is the node path root+p, and p must lie under one of
// the allowed paths.
//
// Writes are confined with os.Root: Open walks down from root to the
// allowed directory refusing any symlink on the way, and all further work
// happens inside an os.Root opened at that directory, which no "..",
// absolute symlink or relative symlink can leave.
type Tree struct {
	root  string   // absolute node path that managed paths are placed under
	allow []string // clean absolute paths, shortest first
}

// New returns the tree of allowPaths (absolute, clean paths as seen under
// root) under root, which must be an existing directory.
func New(root string, allowPaths []string) (*Tree, error) {
	if root == "" {
		return nil, errors.New("root is empty; use \"/\" to manage the node's own paths")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("root %s: %w", root, err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("open root %s: %w (root must be an existing directory; create it or fix root / --root)", abs, atomicfile.Cause(err))
	}
	_ = r.Close()
	allow, err := cleanAllow(allowPaths)
	if err != nil {
		return nil, err
	}
	return &Tree{root: abs, allow: allow}, nil
}

// cleanAllow checks allowPaths and sorts them shortest first, without
// repeats: a path is worked on inside the outermost allowed directory
// holding it, and a symlink from one allowed directory into another stays
// allowed.
func cleanAllow(allowPaths []string) ([]string, error) {
	var out []string
	for _, a := range allowPaths {
		if err := CheckPath(a); err != nil {
			return nil, fmt.Errorf("allowPaths entry %q: %w", a, err)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return len(a) - len(b) })
	return out, nil
}

// Root is the absolute node path managed paths are placed under.
func (t *Tree) Root() string { return t.root }

// NodePath is where managed path p is on the node: p under root.
func (t *Tree) NodePath(p string) string { return filepath.Join(t.root, p) }

// Locate returns the allowed directory holding p and p relative to it.
func (t *Tree) Locate(p string) (allow, rel string, err error) { return locate(p, t.allow) }

// Locate checks that p is absolute, clean and under one of allowPaths, as a
// Tree would, without a node.
func Locate(p string, allowPaths []string) (allow, rel string, err error) {
	allow2, err := cleanAllow(allowPaths)
	if err != nil {
		return "", "", err
	}
	return locate(p, allow2)
}

func locate(p string, allowed []string) (allow, rel string, err error) {
	if err := CheckPath(p); err != nil {
		return "", "", err
	}
	for _, a := range allowed {
		if manifest.Under(p, a) {
			return a, strings.TrimPrefix(strings.TrimPrefix(p, a), "/"), nil
		}
	}
	if slices.Contains(allowed, p) {
		return "", "", fmt.Errorf("%w: %s", ErrNotAllowed, manifest.EntryItself(p))
	}
	list := "none configured"
	if len(allowed) > 0 {
		list = strings.Join(allowed, ", ")
	}
	return "", "", fmt.Errorf("%w: %s is not under any allowed path (%s); add an allowPaths entry for it to the agent config",
		ErrNotAllowed, p, list)
}

// CheckPath rejects a path that is not absolute and clean.
func CheckPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: empty path", ErrInvalidPath)
	case !path.IsAbs(p):
		return fmt.Errorf("%w: %q is not absolute", ErrInvalidPath, p)
	case strings.Contains(p, "\x00"):
		return fmt.Errorf("%w: %q contains a NUL byte", ErrInvalidPath, p)
	case path.Clean(p) != p:
		return fmt.Errorf("%w: %q is not clean (no \"..\", \".\", \"//\" or trailing \"/\"); write it as %q",
			ErrInvalidPath, p, path.Clean(p))
	}
	return nil
}

// Open opens an os.Root at the allowed directory allow under root. It walks
// down one directory at a time and refuses a symlink at any step, so that a
// link such as /etc/infer → /etc cannot widen what tend may write. With
// create, missing directories are made (mode 0755); without, a missing one
// is an error matching fs.ErrNotExist.
func (t *Tree) Open(allow string, create bool) (*os.Root, error) {
	r, err := os.OpenRoot(t.root)
	if err != nil {
		return nil, fmt.Errorf("open root %s: %w", t.root, atomicfile.Cause(err))
	}
	if allow == "/" {
		return r, nil
	}
	walked := ""
	for _, name := range strings.Split(allow[1:], "/") {
		walked += "/" + name
		next, err := t.openChild(r, name, walked, create)
		_ = r.Close()
		if err != nil {
			return nil, err
		}
		r = next
	}
	return r, nil
}

// openChild opens directory name inside r without following a symlink.
// walked is its path under root, for messages.
func (t *Tree) openChild(r *os.Root, name, walked string, create bool) (*os.Root, error) {
	fi, err := r.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := makeDir(r, name); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		fi, err = r.Lstat(name)
	}
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", t.NodePath(walked), atomicfile.Cause(err))
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("%w: %s is a symlink; tend follows no symlink from root down to an allowed path: "+
			"make it a real directory, or allow the path it points to", ErrSymlinkEscape, t.NodePath(walked))
	case !fi.IsDir():
		return nil, fmt.Errorf("%s is not a directory; tend needs one there for allowed path files: move it away",
			t.NodePath(walked))
	}
	child, err := r.OpenRoot(name)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", t.NodePath(walked), atomicfile.Cause(err))
	}
	// Between Lstat and OpenRoot the directory could have been swapped
	// for a symlink; make sure what was opened is what was checked.
	st, err := child.Stat(".")
	if err != nil || !os.SameFile(fi, st) {
		_ = child.Close()
		return nil, fmt.Errorf("%w: %s changed while tend opened it; try again", ErrSymlinkEscape, t.NodePath(walked))
	}
	return child, nil
}

// Prune removes the directory rel inside dir (the allowed directory allow)
// and then each parent, as long as it is empty, stopping at the first that
// is not, at a symlink, and at allow or any other allowed directory. It
// returns the directory whose entries it changed last: rel when it removed
// nothing, else the parent of the last directory removed.
//
// os.Root removes a symlink as readily as an empty directory, so each one
// is checked with Lstat first; a directory swapped for a symlink between
// the two calls can only lose that link, inside the allowed directory.
func (t *Tree) Prune(dir *os.Root, allow, rel string) (string, error) {
	changed := rel
	for ; rel != "." && !slices.Contains(t.allow, path.Join(allow, rel)); rel = path.Dir(rel) {
		fi, err := dir.Lstat(rel)
		if err != nil || !fi.IsDir() {
			break // gone already, or a symlink
		}
		err = dir.Remove(rel)
		if isNotEmpty(err) {
			break
		}
		if err != nil {
			return changed, fmt.Errorf("remove empty directory %s: %w", path.Join(dir.Name(), rel), atomicfile.Cause(err))
		}
		changed = path.Dir(rel)
	}
	return changed, nil
}

// isNotEmpty reports whether err is rmdir's answer for a directory that
// still holds something, or is in use as a mount point.
func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.EBUSY)
}

// Escaped marks err as a symlink escape when os.Root refused a path inside
// allow because a symlink leads out of it.
func Escaped(allow string, err error) error {
	if escapes(err) && !errors.Is(err, ErrSymlinkEscape) {
		return fmt.Errorf("%w: a symlink under %s points outside it: %w", ErrSymlinkEscape, allow, err)
	}
	return err
}

// escapes reports whether err is os.Root refusing a path that leaves it,
// which the os package does not export as a sentinel.
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// MkdirAll creates the directories of rel (a relative, clean directory
// path) inside r that are missing, with mode 0755 whatever the umask.
// Symlinks inside r are followed as os.Root allows: never out of r.
func MkdirAll(r *os.Root, rel string) error {
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
			return fmt.Errorf("stat %s: %w", path.Join(r.Name(), walked), atomicfile.Cause(err))
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
	if err := r.Mkdir(name, atomicfile.DirMode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("create directory %s: %w", path.Join(r.Name(), name), atomicfile.Cause(err))
	}
	if err := r.Chmod(name, atomicfile.DirMode); err != nil {
		return fmt.Errorf("chmod %s: %w", path.Join(r.Name(), name), atomicfile.Cause(err))
	}
	return atomicfile.SyncIn(r, path.Dir(name))
}

// Missing reports whether err, from a stat of a path, means nothing is
// there: the path does not exist, or one of its parents is not a folder.
func Missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// Lookup opens a folder with open, which returns it and a path inside it,
// and lstats that path. Nothing there (the folder missing, the path
// missing, or one of its parents not a folder) is a nil FileInfo and no
// error, with no folder to close; otherwise the caller closes the folder.
// A final symlink is not followed.
func Lookup(open func() (*os.Root, string, error)) (*os.Root, string, fs.FileInfo, error) {
	dir, rel, err := open()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, rel, nil, nil
	}
	if err != nil {
		return nil, rel, nil, err
	}
	fi, err := dir.Lstat(rel)
	if err != nil {
		_ = dir.Close()
		if Missing(err) {
			return nil, rel, nil, nil
		}
		return nil, rel, nil, fmt.Errorf("stat %s: %w", path.Join(dir.Name(), rel), atomicfile.Cause(err))
	}
	return dir, rel, fi, nil
}
