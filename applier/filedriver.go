package applier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// dirMode is the mode of every directory tend creates.
const dirMode fs.FileMode = 0o755

// FileDriver manages files declared inline in manifests. Every managed path
// p is the node path root+p, and p must be under one of the allowed paths.
//
// Writes are confined with os.Root: the driver opens root, walks down to the
// allowed directory refusing any symlink on the way, and does all further
// work inside an os.Root opened at that directory, which no "..", absolute
// symlink or relative symlink can leave.
type FileDriver struct {
	root  string   // absolute node path that managed paths are placed under
	allow []string // clean absolute paths, shortest first
}

// NewFileDriver returns a driver for files under root, confined to
// allowPaths (absolute, clean paths as seen under root). root must be an
// existing directory.
func NewFileDriver(root string, allowPaths []string) (*FileDriver, error) {
	if root == "" {
		return nil, errors.New("file driver: root is empty; use \"/\" to manage the node's own paths")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("file driver: root %s: %w", root, err)
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("file driver: open root %s: %w (root must be an existing directory; create it or fix root / --root)", abs, unwrapPath(err))
	}
	_ = r.Close()
	d := &FileDriver{root: abs}
	for _, a := range allowPaths {
		if err := checkPath(a); err != nil {
			return nil, fmt.Errorf("file driver: allowPaths entry %q: %w", a, err)
		}
		if !slices.Contains(d.allow, a) {
			d.allow = append(d.allow, a)
		}
	}
	// Shortest first: a path is worked on inside the outermost allowed
	// directory holding it, and a symlink from one allowed directory into
	// another stays allowed.
	slices.SortFunc(d.allow, func(a, b string) int { return len(a) - len(b) })
	return d, nil
}

// Kind returns planner.KindFile.
func (d *FileDriver) Kind() planner.Kind { return planner.KindFile }

// Observe reports the file at id's path. A regular file has its content
// digest and mode; a symlink, directory or other thing at the path exists
// with a content of "<symlink>", "<directory>" or "<not a regular file>" so
// that it differs from any declaration. A final symlink is never followed.
func (d *FileDriver) Observe(ctx context.Context, id string) (planner.State, error) {
	if err := ctx.Err(); err != nil {
		return planner.State{}, err
	}
	allow, rel, err := d.locate(id)
	if err != nil {
		return planner.State{}, err
	}
	dir, err := d.openAllowed(allow, false)
	if errors.Is(err, fs.ErrNotExist) {
		return planner.State{}, nil
	}
	if err != nil {
		return planner.State{}, err
	}
	defer dir.Close()

	fi, err := dir.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return planner.State{}, nil
	}
	if err != nil {
		return planner.State{}, confined(allow, fmt.Errorf("stat %s: %w", d.nodePath(FilePath(id)), unwrapPath(err)))
	}
	content := contentOther
	switch {
	case fi.Mode().IsRegular():
		if content, err = digestFile(dir, rel, fi); err != nil {
			return planner.State{}, err
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		content = contentSymlink
	case fi.IsDir():
		content = contentDirectory
	}
	return planner.State{Exists: true, Fields: []planner.Field{
		{Name: FieldContent, Value: content},
		{Name: FieldMode, Value: formatMode(fi.Mode())},
	}}, nil
}

// copyBufs holds the buffers digestFile reads files through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// digestFile returns the content digest of the regular file rel, which
// must still be the file fi describes.
func digestFile(dir *os.Root, rel string, fi fs.FileInfo) (string, error) {
	f, err := dir.Open(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() || !os.SameFile(fi, st) {
		return "", fmt.Errorf("%s changed while tend read it; try again", f.Name())
	}
	h := sha256.New()
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	// The struct hides f's WriterTo, which would not use buf.
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, *buf); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Apply creates, updates or deletes the file of a.Resource. spec is the
// manifest.File (or *manifest.File) declaring it for Create and Update.
//
// A write replaces the file atomically with the exact declared mode, and
// replaces a symlink at the path by a regular file without touching the
// symlink's target; it refuses to replace a directory. Delete removes a
// regular file and leaves anything else at the path alone: it is not what
// tend created. It then removes the folders the file leaves empty, up to
// but never including an allowed directory (see prune).
func (d *FileDriver) Apply(ctx context.Context, a planner.Action, spec any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	allow, rel, err := d.locate(a.Resource)
	if err != nil {
		return err
	}
	switch a.Type {
	case planner.Create, planner.Update:
		var f manifest.File
		switch s := spec.(type) {
		case manifest.File:
			f = s
		case *manifest.File:
			f = *s
		default:
			return fmt.Errorf("%s %s: want a manifest.File, got %T", a.Type, a.Resource, spec)
		}
		if FileID(f.Path) != a.Resource {
			return fmt.Errorf("%s %s: spec declares %s", a.Type, a.Resource, FileID(f.Path))
		}
		mode, err := parseMode(f.Mode)
		if err != nil {
			return err
		}
		return confined(allow, d.write(allow, rel, []byte(f.Content), mode))
	case planner.Delete:
		return confined(allow, d.remove(allow, rel))
	default:
		return fmt.Errorf("%s: a file cannot %s", a.Resource, a.Type)
	}
}

func (d *FileDriver) write(allow, rel string, data []byte, mode fs.FileMode) error {
	dir, err := d.openAllowed(allow, true)
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := mkdirs(dir, path.Dir(rel)); err != nil {
		return err
	}
	if fi, err := dir.Lstat(rel); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %s is a directory; tend replaces files and symlinks, never directories: remove it or declare another path",
			ErrNotRegular, path.Join(dir.Name(), rel))
	}
	return writeAtomic(dir, rel, data, mode)
}

func (d *FileDriver) remove(allow, rel string) error {
	dir, err := d.openAllowed(allow, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer dir.Close()
	fi, err := dir.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", path.Join(dir.Name(), rel), unwrapPath(err))
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if err := dir.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path.Join(dir.Name(), rel), unwrapPath(err))
	}
	changed, err := d.prune(dir, allow, path.Dir(rel))
	if err != nil {
		return err
	}
	return syncDir(dir, changed)
}

// prune removes the directory rel inside dir (the allowed directory allow)
// and then each parent, as long as it is empty, stopping at the first that
// is not, at a symlink, and at allow or any other allowed directory. It
// returns the directory whose entries it changed last: rel when it removed
// nothing, else the parent of the last directory removed.
//
// os.Root removes a symlink as readily as an empty directory, so each one
// is checked with Lstat first; a directory swapped for a symlink between
// the two calls can only lose that link, inside the allowed directory.
func (d *FileDriver) prune(dir *os.Root, allow, rel string) (string, error) {
	changed := rel
	for ; rel != "." && !slices.Contains(d.allow, path.Join(allow, rel)); rel = path.Dir(rel) {
		fi, err := dir.Lstat(rel)
		if err != nil || !fi.IsDir() {
			break // gone already, or a symlink
		}
		err = dir.Remove(rel)
		if isNotEmpty(err) {
			break
		}
		if err != nil {
			return changed, fmt.Errorf("remove empty directory %s: %w", path.Join(dir.Name(), rel), unwrapPath(err))
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

// locate returns the allowed directory holding id's path and the path
// relative to it.
func (d *FileDriver) locate(id string) (allow, rel string, err error) {
	if !strings.HasPrefix(id, filePrefix+"/") {
		return "", "", fmt.Errorf("%w: %q is not a file resource id (file/<absolute path>)", ErrInvalidPath, id)
	}
	p := FilePath(id)
	if err := checkPath(p); err != nil {
		return "", "", err
	}
	for _, a := range d.allow {
		if manifest.Under(p, a) {
			return a, strings.TrimPrefix(strings.TrimPrefix(p, a), "/"), nil
		}
	}
	allowed := "none configured"
	if len(d.allow) > 0 {
		allowed = strings.Join(d.allow, ", ")
	}
	return "", "", fmt.Errorf("%w: %s is not under any allowed path (%s); add an allowPaths entry for it to the agent config",
		ErrNotAllowed, p, allowed)
}

func (d *FileDriver) nodePath(p string) string { return filepath.Join(d.root, p) }
