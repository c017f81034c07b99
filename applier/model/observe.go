package model

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tend-dev/tend/internal/confine"
	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Observe reports the version the model's stable path points at. The
// digest is the active version's when its folder is exactly as
// materialised; a changed folder, a symlink pointed elsewhere, or something
// else at the path differs from any digest, and the state's Note says how.
// The stable path is the declared one (spec, a render.Model), or for a
// model no longer declared the one its record names.
func (d *Driver) Observe(ctx context.Context, id string, s any) (planner.State, error) {
	if err := ctx.Err(); err != nil {
		return planner.State{}, err
	}
	name := planner.ModelName(id)
	rec, err := d.record(name)
	if err != nil {
		return planner.State{}, err
	}
	var linkPath, digest string
	var include []string
	switch {
	case s != nil:
		m, err := spec(id, s)
		if err != nil {
			return planner.State{}, err
		}
		linkPath, include, digest = m.Path, m.Include, m.Digest
	case rec != nil:
		linkPath = rec.Path
	default:
		return planner.State{}, nil
	}
	dir, rel, fi, err := confine.Lookup(func() (*os.Root, string, error) { return d.linkDir(name, linkPath, false) })
	if err != nil || fi == nil {
		return planner.State{}, err
	}
	defer dir.Close()
	if fi.Mode()&fs.ModeSymlink == 0 {
		what := planner.ValueNotRegular
		if fi.IsDir() {
			what = planner.ValueDirectory
		} else if fi.Mode().IsRegular() {
			what = planner.ValueRegularFile
		}
		st := state(what, nil, "")
		st.Blocked = blocked(path.Join(dir.Name(), rel), what)
		return st, nil
	}
	target, err := dir.Readlink(rel)
	if err != nil {
		return planner.State{}, err
	}
	var v *version
	if rec != nil && filepath.Dir(target) == d.dir.Model(name) {
		v = rec.version(filepath.Base(target))
	}
	if v == nil {
		return state("symlink to "+target, nil, "symlink points to "+target+", not to a version tend keeps"), nil
	}
	changes, err := d.check(rec, v, false)
	if err != nil {
		return planner.State{}, err
	}
	if len(changes) > 0 {
		return state(v.Digest+" (modified)", v.Include, "model folder changed on node: "+summarise(changes)), nil
	}
	if len(include) == 0 && len(v.Include) > 0 {
		// The declaration has no include field to compare: the digest
		// says the folder holds a part of the version only.
		return state(v.Digest+" (include "+render.FormatInclude(v.Include)+")", v.Include, ""), nil
	}
	note := ""
	if v.Digest == digest && slices.Equal(v.Include, include) {
		// In sync: the note is no drift, only what the status says of it.
		note = skippedNote(v.Skipped)
	}
	return state(v.Digest, v.Include, note), nil
}

// skippedNote says which special files of its layers a version folder
// left out ("" for none).
func skippedNote(skipped []string) string {
	if len(skipped) == 0 {
		return ""
	}
	return fmt.Sprintf("left out %d special file(s) tend does not write: %s", len(skipped), printable.ShortList(skipped, 5))
}

// state is an observed model: its digest field, and its include field
// when the version folder holds what an include selected.
func state(digest string, include []string, note string) planner.State {
	return planner.State{Exists: true, Fields: render.ModelFields(digest, include), Note: note}
}

// summarise lists the first few changes and counts the rest.
func summarise(changes []string) string {
	const show = 5
	if len(changes) <= show {
		return strings.Join(changes, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(changes[:show], ", "), len(changes)-show)
}

// check compares version v's folder with its fingerprints and returns what
// changed. A file whose stat fingerprint changed is re-hashed; every file
// is when deep is set or the last full check is older than VerifyInterval.
// A file found unchanged whose fingerprint moved (a touch) gets the new
// fingerprint, so it is not re-hashed on every tick.
func (d *Driver) check(rec *record, v *version, deep bool) ([]string, error) {
	root := d.dir.Version(rec.Name, v.Dir)
	now := d.now()
	deep = deep || now.Sub(v.VerifiedAt) >= d.opts.VerifyInterval
	found, err := walkVersion(root)
	if errors.Is(err, fs.ErrNotExist) {
		return []string{"version folder " + root + " deleted"}, nil
	}
	if err != nil {
		return nil, err
	}
	var changes []string
	dirty := false
	for i := range v.Entries {
		want := &v.Entries[i]
		got, ok := found[want.Path]
		delete(found, want.Path)
		if what := differs(want, got, ok); what != "" {
			changes = append(changes, want.Path+" "+what)
			continue
		}
		if got.Type != "" || !deep && got.Ino == want.Ino && got.Mtime == want.Mtime && got.Ctime == want.Ctime {
			continue
		}
		sum, err := hashFile(filepath.Join(root, filepath.FromSlash(want.Path)))
		if err != nil {
			return nil, err
		}
		if sum != want.Digest {
			changes = append(changes, want.Path+" edited")
			continue
		}
		if got.Ino != want.Ino || got.Mtime != want.Mtime || got.Ctime != want.Ctime {
			want.Ino, want.Mtime, want.Ctime = got.Ino, got.Mtime, got.Ctime
			dirty = true
		}
	}
	for _, p := range slices.Sorted(maps.Keys(found)) {
		changes = append(changes, p+" added")
	}
	if deep && len(changes) == 0 {
		v.VerifiedAt, dirty = now, true
	}
	if dirty {
		if err := rec.save(d.dir); err != nil {
			return nil, fmt.Errorf("save model record: %w", err)
		}
	}
	return changes, nil
}

// differs says how entry got (ok: found at all) differs from want without
// reading its content: "" when only a hash can tell.
func differs(want *fileStamp, got fileStamp, ok bool) string {
	switch {
	case !ok:
		return "deleted"
	case got.Type != want.Type:
		return "replaced"
	case got.Mode != want.Mode:
		return "mode changed"
	case got.Type == "link" && got.Target != want.Target:
		return "points elsewhere"
	case got.Type == "" && got.Size != want.Size:
		return "edited"
	}
	return ""
}
