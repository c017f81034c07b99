package model

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/confine"
	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Apply activates the prepared version of a model (Create, Update) by
// swapping its stable path to it, or removes a model (Delete): its symlink,
// when it still points into stateDir, and every version of it.
func (d *Driver) Apply(ctx context.Context, a planner.Action, s any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch a.Type {
	case planner.Create, planner.Update:
		m, err := spec(a.Resource, s)
		if err != nil {
			return err
		}
		if err := d.Prepare(ctx, a, m); err != nil {
			return err
		}
		return d.activate(ctx, m)
	case planner.Delete:
		return d.remove(planner.ModelName(a.Resource))
	default:
		return fmt.Errorf("%s: a model cannot %s", a.Resource, a.Type)
	}
}

func (d *Driver) activate(ctx context.Context, m render.Model) error {
	d.mu.Lock()
	vdir := d.prepared[m.Name]
	d.mu.Unlock()
	rec, err := d.record(m.Name)
	if err != nil {
		return err
	}
	v := rec.version(vdir)
	if v == nil {
		return fmt.Errorf("%s: prepared version %s is not recorded", planner.ModelID(m.Name), vdir)
	}
	dir, rel, err := d.linkDir(m.Name, m.Path, true)
	if err != nil {
		return err
	}
	defer dir.Close()
	target := d.dir.Version(m.Name, vdir)
	if err := traversable(d.state); err != nil {
		return err
	}
	// The active version first, then the others most recent first. Those
	// beyond KeepVersions go in Finish, once the whole plan has held: a
	// rollback swaps back to the version active before.
	versions := []version{*v}
	for _, o := range rec.Versions {
		if o.Dir != vdir {
			versions = append(versions, o)
		}
	}
	prev := rec.active()
	// The record names the new version before the link does: after a
	// crash in between, the link still points at a version the record
	// keeps, and the next tick swaps it (a held model is held at the
	// version it was being moved to, never rolled back).
	next := &record{Name: m.Name, Ref: m.Ref, Policy: m.Policy, Path: m.Path, Active: vdir, Versions: versions}
	if err := d.setRecord(next); err != nil {
		return err
	}
	failpoint.Hit("model:record")
	if err := swapLink(dir, rel, target); err != nil {
		return fmt.Errorf("activate %s: %w", planner.ModelID(m.Name), err)
	}
	failpoint.Hit("model:swapped")
	if rec.Path != m.Path && rec.Active != "" {
		d.unlink(m.Name, rec.Path) // the stable path moved: the old link goes
	}
	from := "none"
	if prev != nil {
		from = prev.Digest
	}
	d.log.InfoContext(ctx, "model activated", logKeyResource, planner.ModelID(m.Name), "ref", m.Ref, "tag", m.Tag,
		"digest", v.Digest, "previous", from, "path", target)
	return nil
}

// traversable lets others pass through stateDir (a stateDir made 0700 by
// an older tend), so a service running as another user reaches the model
// versions its ${model:…} path leads to.
func traversable(stateDir string) error {
	fi, err := os.Stat(stateDir)
	if err != nil || fi.Mode().Perm()&0o011 == 0o011 {
		return err
	}
	return os.Chmod(stateDir, fi.Mode().Perm()|0o011)
}

// remove deletes model name: its stable path, when that is still a symlink
// into its folder in stateDir, and the folder with every version. The
// folder is renamed away first, so a crash leaves all of it or none.
func (d *Driver) remove(name string) error {
	rec, err := d.record(name)
	if err != nil {
		return err
	}
	if rec != nil {
		d.unlink(name, rec.Path)
	}
	trash := d.dir.Trash(name)
	if err := os.Rename(d.dir.Model(name), trash); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", planner.ModelID(name), err)
	}
	if err := removeTree(trash); err != nil {
		return fmt.Errorf("remove %s: %w", planner.ModelID(name), err)
	}
	d.mu.Lock()
	d.records[name] = nil
	d.mu.Unlock()
	return nil
}

// unlink removes the symlink at a model's stable path p if it points into
// the model's folder, and prunes the folders that leaves empty.
func (d *Driver) unlink(name, p string) {
	dir, rel, err := d.linkDir(name, p, false)
	if err != nil {
		return
	}
	defer dir.Close()
	target, err := dir.Readlink(rel)
	if err != nil || filepath.Dir(target) != d.dir.Model(name) {
		return
	}
	if dir.Remove(rel) != nil || p == "" {
		return
	}
	allow, _, _ := d.tree.Locate(p)
	if changed, err := d.tree.Prune(dir, allow, path.Dir(rel)); err == nil {
		_ = atomicfile.SyncIn(dir, changed)
	}
}

// linkDir opens the folder holding model name's stable path: for a
// declared path p, its allowed directory (confined as files are), else the
// model's folder in stateDir. It returns the path of the link inside it.
func (d *Driver) linkDir(name, p string, create bool) (*os.Root, string, error) {
	if p == "" {
		dir := d.dir.Model(name)
		if create {
			if err := os.MkdirAll(dir, atomicfile.DirMode); err != nil {
				return nil, "", err
			}
		}
		r, err := os.OpenRoot(dir)
		return r, statedir.ModelLink, err
	}
	allow, rel, err := d.tree.Locate(p)
	if err != nil {
		return nil, "", err
	}
	dir, err := d.tree.Open(allow, create)
	if err != nil {
		return nil, "", err
	}
	if create {
		if err := confine.MkdirAll(dir, path.Dir(rel)); err != nil {
			_ = dir.Close()
			return nil, "", confine.Escaped(allow, err)
		}
	}
	return dir, rel, nil
}

// swapLink points the symlink rel inside r at target atomically (see
// atomicfile.SwapLink). Only nothing or a symlink is replaced (see mine).
func swapLink(r *os.Root, rel, target string) error {
	if err := mine(r, rel); err != nil {
		return err
	}
	return atomicfile.SwapLink(r, rel, target)
}

// mine checks that what is at a model's stable path rel inside r is
// nothing or a symlink, which tend may point at a version (a symlink holds
// no data: repointed by hand, it is drift). Anything else, a file or a
// folder, tend did not make there and does not delete: the error says to
// move it.
func mine(r *os.Root, rel string) error {
	fi, err := r.Lstat(rel)
	if confine.Missing(err) || err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	if err != nil {
		return err
	}
	what := planner.ValueNotRegular
	switch {
	case fi.IsDir():
		what = planner.ValueDirectory
	case fi.Mode().IsRegular():
		what = planner.ValueRegularFile
	}
	return fmt.Errorf("%w: %s", confine.ErrNotRegular, blocked(path.Join(r.Name(), rel), what))
}

// blocked says why a model's link cannot go at p, where what (a
// planner.Value…) stands, and what to do.
func blocked(p, what string) string {
	var thing string
	switch what {
	case planner.ValueDirectory:
		thing = "a directory"
	case planner.ValueRegularFile:
		thing = "a regular file"
	default:
		thing = "something that is not a file"
	}
	return p + " is " + thing + ", which tend did not make: a model's path is a symlink tend makes, and tend does not delete " +
		"what it did not create; move it away or declare another path"
}

// clear checks, before anything is pulled, that model m's stable path can
// take tend's link (see mine).
func (d *Driver) clear(m render.Model) error {
	dir, rel, err := d.linkDir(m.Name, m.Path, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer dir.Close()
	return mine(dir, rel)
}
