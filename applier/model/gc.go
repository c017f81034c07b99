package model

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Finish collects garbage after a plan applied in full: version folders no
// record keeps, models no longer recorded, blobs no kept version uses, and
// partial downloads (every declared model is whole by now).
//
// Nothing is collected while a model is held or offline (its registry failed): its
// pending download must survive. Blobs and partial downloads of every
// declared model's artifact, and of a release staging (see Stage), are
// kept in any case. A model that is neither
// declared nor deleted by the plan (its link was already gone) is removed
// here.
func (d *Driver) Finish(ctx context.Context, declared map[string]any) error {
	keep := map[string]bool{}
	names := map[string]bool{}
	for id, s := range declared {
		m, err := spec(id, s)
		if err != nil {
			return err
		}
		if m.Held != nil || m.Offline != nil {
			return nil
		}
		names[m.Name] = true
		for _, b := range d.blobs(m) {
			keep[b] = true
		}
	}
	entries, err := os.ReadDir(string(d.dir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var errs []error
	for _, e := range entries {
		switch {
		case !e.IsDir():
		case strings.HasPrefix(e.Name(), statedir.TrashPrefix):
			errs = append(errs, removeTree(filepath.Join(string(d.dir), e.Name())))
		case !names[e.Name()] && d.linked(e.Name()):
			// Not declared, not deleted by the plan (tend did not create
			// it: it adopted it), and its path still leads here: tend
			// forgets it and deletes nothing the plan did not show.
			d.log.InfoContext(ctx, "model no longer declared and not created by tend: its link and versions stay",
				logKeyResource, planner.ModelID(e.Name()))
		case !names[e.Name()]:
			errs = append(errs, d.remove(e.Name()))
		default:
			errs = append(errs, d.tidy(ctx, e.Name(), keep))
		}
	}
	if err := errors.Join(errs...); err != nil {
		// A record that cannot be read may hold blobs: keep them all.
		return err
	}
	d.addStaged(keep)
	n, freed, err := d.store.GC(keep)
	if n > 0 {
		d.log.InfoContext(ctx, "blobs collected", "blobs", n, "bytes", freed)
	}
	return err
}

// linked reports whether model name's stable path, as its record names it,
// is a link into the model's folder.
func (d *Driver) linked(name string) bool {
	rec, err := loadRecord(d.dir, name)
	if err != nil || rec == nil {
		return false
	}
	dir, rel, err := d.linkDir(name, rec.Path, false)
	if err != nil {
		return false
	}
	defer dir.Close()
	target, err := dir.Readlink(rel)
	return err == nil && filepath.Dir(target) == d.dir.Model(name)
}

// blobs lists the blobs of m's artifact when its manifest is at hand: read
// this tick, or in the store.
func (d *Driver) blobs(m render.Model) []string {
	d.mu.Lock()
	art := d.arts[m.Digest]
	d.mu.Unlock()
	if art == nil {
		h, err := v1.NewHash(m.Digest)
		if err != nil {
			return nil
		}
		if art, err = d.store.LoadArtifact(h, d.opts.Platform); err != nil {
			return nil
		}
	}
	var out []string
	for _, b := range art.Blobs() {
		out = append(out, b.Digest.String())
	}
	return out
}

// tidy trims the versions of a declared model and removes from its folder
// what its record does not keep; it adds the blobs of its versions to keep.
func (d *Driver) tidy(ctx context.Context, name string, keep map[string]bool) error {
	folder := d.dir.Model(name)
	rec, err := loadRecord(d.dir, name)
	if err == nil && rec != nil {
		err = d.trim(ctx, rec)
	}
	if err != nil {
		return err
	}
	if rec == nil {
		return removeTree(folder)
	}
	kept := map[string]bool{statedir.ModelRecordFile: true, statedir.ModelLink: true}
	for _, v := range rec.Versions {
		kept[v.Dir] = true
		for _, b := range v.Blobs {
			keep[b] = true
		}
	}
	inside, _ := os.ReadDir(folder)
	var errs []error
	for _, f := range inside {
		if !kept[f.Name()] {
			errs = append(errs, removeTree(filepath.Join(folder, f.Name())))
		}
	}
	return errors.Join(errs...)
}

// trim drops the versions of rec beyond the active one and KeepVersions
// others, and damaged copies of the active digest.
func (d *Driver) trim(ctx context.Context, rec *record) error {
	act := rec.active()
	if act == nil {
		return nil
	}
	versions := []version{*act}
	var drop []string
	for _, o := range rec.Versions {
		switch {
		case o.Dir == act.Dir:
		case o.Digest == act.Digest || len(versions) > d.opts.KeepVersions:
			drop = append(drop, o.Dir)
		default:
			versions = append(versions, o)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	rec.Versions = versions
	if err := d.setRecord(rec); err != nil {
		return err
	}
	for _, o := range drop {
		if err := removeTree(d.dir.Version(rec.Name, o)); err != nil {
			d.log.WarnContext(ctx, "remove old model version", logKeyResource, planner.ModelID(rec.Name), logKeyError, err.Error())
		}
	}
	// Removing links to shared blobs moved their ctime: refresh the
	// fingerprints, or the next tick would re-hash every shared file.
	return d.refresh(rec)
}

// refresh takes the new ctime of every file of rec's versions whose size,
// mtime and inode are unchanged: tend's own link operations on shared
// blobs move only the ctime.
func (d *Driver) refresh(rec *record) error {
	for i := range rec.Versions {
		v := &rec.Versions[i]
		root := d.dir.Version(rec.Name, v.Dir)
		for j := range v.Entries {
			e := &v.Entries[j]
			if e.Type != "" {
				continue
			}
			fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(e.Path)))
			if err != nil {
				continue
			}
			ino, mtime, ctime := statIDs(fi)
			if fi.Size() == e.Size && ino == e.Ino && mtime == e.Mtime {
				e.Ctime = ctime
			}
		}
	}
	return d.setRecord(rec)
}
