package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/confine"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Driver manages files under the allowed paths of a confine.Tree.
type Driver struct {
	tree *confine.Tree
}

var (
	_ applier.Driver   = (*Driver)(nil)
	_ applier.Undoer   = (*Driver)(nil)
	_ applier.Finisher = (*Driver)(nil)
)

// New returns the file driver of tree.
func New(tree *confine.Tree) *Driver { return &Driver{tree: tree} }

// Kind returns planner.KindFile.
func (d *Driver) Kind() planner.Kind { return planner.KindFile }

// Observe reports the file at id's path. A regular file has its content
// digest and mode; a symlink, directory or other thing at the path exists
// with a content of planner.ValueSymlink, ValueDirectory or ValueNotRegular
// so that it differs from any declaration; a directory is Blocked (Apply
// refuses to replace it). A final symlink is never followed.
func (d *Driver) Observe(ctx context.Context, id string, _ any) (planner.State, error) {
	if err := ctx.Err(); err != nil {
		return planner.State{}, err
	}
	allow, rel, err := d.locate(id)
	if err != nil {
		return planner.State{}, err
	}
	dir, _, fi, err := confine.Lookup(func() (*os.Root, string, error) {
		r, err := d.tree.Open(allow, false)
		return r, rel, err
	})
	if err != nil {
		return planner.State{}, confine.Escaped(allow, err)
	}
	if fi == nil {
		return planner.State{}, nil
	}
	defer dir.Close()
	content := planner.ValueNotRegular
	switch {
	case fi.Mode().IsRegular():
		if content, err = confine.Digest(dir, rel, fi); err != nil {
			return planner.State{}, err
		}
	case fi.Mode()&fs.ModeSymlink != 0:
		content = planner.ValueSymlink
	case fi.IsDir():
		content = planner.ValueDirectory
	}
	st := planner.State{Exists: true, Fields: []planner.Field{
		{Name: planner.FieldContent, Value: content},
		{Name: planner.FieldMode, Value: render.FormatMode(fi.Mode())},
	}}
	if fi.IsDir() {
		st.Blocked = path.Join(dir.Name(), rel) + " is a directory; tend replaces files and symlinks, never directories: remove it or declare another path"
	}
	return st, nil
}

// Apply creates, updates or deletes the file of a.Resource. spec is the
// render.File declaring it for Create and Update.
//
// A write replaces the file atomically with the exact declared mode, and
// replaces a symlink at the path by a regular file without touching the
// symlink's target; it refuses to replace a directory. Delete removes a
// regular file and leaves anything else at the path alone: it is not what
// tend created. It then removes the folders the file leaves empty, up to
// but never including an allowed directory (see confine.Tree.Prune).
func (d *Driver) Apply(ctx context.Context, a planner.Action, spec any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	allow, rel, err := d.locate(a.Resource)
	if err != nil {
		return err
	}
	switch a.Type {
	case planner.Create, planner.Update:
		f, ok := spec.(render.File)
		if !ok {
			return fmt.Errorf("%s %s: want a render.File, got %T", a.Type, a.Resource, spec)
		}
		if planner.FileID(f.Path) != a.Resource {
			return fmt.Errorf("%s %s: spec declares %s", a.Type, a.Resource, planner.FileID(f.Path))
		}
		return confine.Escaped(allow, d.write(allow, rel, f.Content, f.Mode))
	case planner.Delete:
		return confine.Escaped(allow, d.remove(allow, rel))
	default:
		return fmt.Errorf("%s: a file cannot %s", a.Resource, a.Type)
	}
}

func (d *Driver) write(allow, rel string, data []byte, mode fs.FileMode) error {
	dir, err := d.tree.Open(allow, true)
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := confine.MkdirAll(dir, path.Dir(rel)); err != nil {
		return err
	}
	if fi, err := dir.Lstat(rel); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %s is a directory; tend replaces files and symlinks, never directories: remove it or declare another path",
			confine.ErrNotRegular, path.Join(dir.Name(), rel))
	}
	return atomicfile.WriteIn(dir, rel, data, mode)
}

func (d *Driver) remove(allow, rel string) error {
	dir, err := d.tree.Open(allow, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer dir.Close()
	fi, err := dir.Lstat(rel)
	if confine.Missing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", path.Join(dir.Name(), rel), atomicfile.Cause(err))
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if err := dir.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path.Join(dir.Name(), rel), atomicfile.Cause(err))
	}
	// And what a killed write of it left (see atomicfile.TempName).
	_ = dir.Remove(path.Join(path.Dir(rel), atomicfile.TempName(path.Base(rel))))
	changed, err := d.tree.Prune(dir, allow, path.Dir(rel))
	if err != nil {
		return err
	}
	return atomicfile.SyncIn(dir, changed)
}

// Undo reads the file as it is: the undo writes it back, or removes the
// file the action creates. Anything but a regular file is left alone.
func (d *Driver) Undo(_ context.Context, a planner.Action, _ any) (func(context.Context) error, error) {
	allow, rel, err := d.locate(a.Resource)
	if err != nil {
		return nil, err
	}
	removeIt := func(context.Context) error { return confine.Escaped(allow, d.remove(allow, rel)) }
	dir, err := d.tree.Open(allow, false)
	if errors.Is(err, fs.ErrNotExist) {
		return removeIt, nil
	}
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	fi, err := dir.Lstat(rel)
	switch {
	case confine.Missing(err):
		return removeIt, nil
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, nil
	}
	data, err := dir.ReadFile(rel)
	if err != nil {
		return nil, err
	}
	mode := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	return func(context.Context) error { return confine.Escaped(allow, d.write(allow, rel, data, mode)) }, nil
}

// Finish removes, from every folder holding a declared file, the
// temporary files that writes killed half-way left there (see
// atomicfile.RemoveTemps): tend's own, never a file someone else made.
func (d *Driver) Finish(ctx context.Context, declared map[string]any) error {
	type folder struct{ allow, dir string }
	seen := map[folder]bool{}
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(declared)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		allow, rel, err := d.locate(id)
		if err != nil {
			continue
		}
		f := folder{allow, path.Dir(rel)}
		if seen[f] {
			continue
		}
		seen[f] = true
		if err := d.removeTemps(allow, f.dir); err != nil {
			errs = append(errs, confine.Escaped(allow, err))
		}
	}
	return errors.Join(errs...)
}

func (d *Driver) removeTemps(allow, dir string) error {
	r, err := d.tree.Open(allow, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = atomicfile.RemoveTemps(r, dir)
	return err
}

// locate returns the allowed directory holding id's path and the path
// relative to it.
func (d *Driver) locate(id string) (allow, rel string, err error) {
	if !strings.HasPrefix(id, planner.FileID("/")) {
		return "", "", fmt.Errorf("%w: %q is not a file resource id (file/<absolute path>)", confine.ErrInvalidPath, id)
	}
	return d.tree.Locate(planner.FilePath(id))
}
