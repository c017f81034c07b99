package file

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/confine"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

var _ applier.Describer = (*Driver)(nil)

// Describe returns the content of the regular file at id's path, for a
// diff: at most planner.MaxDiffBytes of it, with its whole size. The
// content of a file its spec marks sensitive is not read: its size
// alone is returned. Anything but a regular file, or nothing, is an
// empty content.
func (d *Driver) Describe(_ context.Context, id string, spec any) (planner.Content, error) {
	sensitive := false
	if f, ok := spec.(render.File); ok {
		sensitive = f.Sensitive
	}
	allow, rel, err := d.locate(id)
	if err != nil {
		return planner.Content{}, err
	}
	dir, _, fi, err := confine.Lookup(func() (*os.Root, string, error) {
		r, err := d.tree.Open(allow, false)
		return r, rel, err
	})
	if err != nil {
		return planner.Content{}, confine.Escaped(allow, err)
	}
	if fi == nil {
		return planner.Content{}, nil
	}
	defer dir.Close()
	c := planner.Content{Size: fi.Size(), Sensitive: sensitive}
	if !fi.Mode().IsRegular() || sensitive || c.Size > planner.MaxDiffBytes {
		return c, nil
	}
	f, err := dir.Open(rel)
	if err != nil {
		return planner.Content{}, fmt.Errorf("open %s: %w", path.Join(dir.Name(), rel), atomicfile.Cause(err))
	}
	defer f.Close()
	if c.Data, err = io.ReadAll(io.LimitReader(f, planner.MaxDiffBytes)); err != nil {
		return planner.Content{}, fmt.Errorf("read %s: %w", path.Join(dir.Name(), rel), atomicfile.Cause(err))
	}
	c.Size = max(c.Size, int64(len(c.Data)))
	return c, nil
}
