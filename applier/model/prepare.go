package model

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/store"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Prepare pulls the version a.Resource needs and materialises it, changing
// nothing in use: the blobs it lacks are downloaded (after a check that
// they fit on the disk) and the version's folder is built beside the
// active one. A version kept from before and intact is used as it is.
func (d *Driver) Prepare(ctx context.Context, a planner.Action, s any) error {
	if a.Type != planner.Create && a.Type != planner.Update {
		return nil
	}
	m, err := spec(a.Resource, s)
	if err != nil {
		return err
	}
	d.mu.Lock()
	done := d.prepared[m.Name] != ""
	d.mu.Unlock()
	if done {
		return nil
	}
	rec, err := d.record(m.Name)
	if err != nil {
		return err
	}
	if rec == nil {
		rec = &record{Name: m.Name}
	}
	if err := d.clear(m); err != nil {
		return fmt.Errorf("%s: %w", planner.ModelID(m.Name), err)
	}
	// A kept version of that digest, intact, is activated as it is: a
	// rollback, or a symlink to repair.
	damaged := false
	for i := range rec.Versions {
		v := &rec.Versions[i]
		if v.Digest != m.Digest || !slices.Equal(v.Include, m.Include) {
			continue // another version, or another part of it
		}
		changes, err := d.check(rec, v, false)
		if err != nil {
			return err
		}
		if len(changes) == 0 {
			d.setPrepared(m.Name, v.Dir)
			return nil
		}
		damaged = true
	}
	limit, err := d.unpackLimit()
	if err != nil {
		return err
	}
	if err := d.refused(m.Digest, limit); err != nil {
		return fmt.Errorf("%s: %w", planner.ModelID(m.Name), err)
	}
	art, err := d.selected(ctx, m)
	if err != nil {
		return err
	}
	if damaged {
		// Files are hard links to blobs and to the trees of tar layers,
		// so an edit in place may have changed the store too: drop any
		// blob or tree that no longer matches, and download only those.
		for _, e := range art.Entries {
			if err := d.store.Verify(e.Digest); err != nil {
				d.log.WarnContext(ctx, "blob damaged; downloading it again", logKeyResource, a.Resource, logKeyDigest, e.Digest.String(),
					logKeyError, err.Error())
			}
		}
	}
	n, err := d.fetch(ctx, m, art, nil, limit)
	d.loaded.Add(n)
	if err != nil {
		return err
	}
	v, err := d.materialise(ctx, rec, m, art, limit)
	if errors.Is(err, store.ErrNotStored) {
		// A layer's tree no longer held a file this version needs (it was
		// collected when no version used it) and was dropped: downloaded
		// again, once.
		n, err = d.fetch(ctx, m, art, nil, limit)
		d.loaded.Add(n)
		if err != nil {
			return err
		}
		v, err = d.materialise(ctx, rec, m, art, limit)
	}
	if err != nil {
		d.tooLarge(ctx, m, limit, err)
		return err
	}
	rec.Versions = append(rec.Versions, v)
	if err := d.setRecord(rec); err != nil {
		return err
	}
	d.setPrepared(m.Name, v.Dir)
	return nil
}

func (d *Driver) setPrepared(name, dir string) {
	d.mu.Lock()
	d.prepared[name] = dir
	d.mu.Unlock()
}

// tooLarge records that m's digest is refused when err says it unpacked
// past limit bytes.
func (d *Driver) tooLarge(ctx context.Context, m render.Model, limit int64, err error) {
	if !errors.Is(err, extract.ErrTooLarge) {
		return
	}
	if rerr := d.refuse(m.Name, m.Digest, limit, err); rerr != nil {
		d.log.WarnContext(ctx, "cannot record the refused model", logKeyResource, planner.ModelID(m.Name), logKeyError, rerr.Error())
	}
}

// need returns what art needs and the store lacks, and the room pulling
// it takes on stateDir's file system: the blobs still to download, the
// trees their tar layers unpack into (beside the blob until whole: a
// compression ratio of 2 is allowed for on compressed layers), and the
// copies of files with a mode of their own.
func (d *Driver) need(art *modelkit.Artifact) ([]v1.Descriptor, int64) {
	missing := d.store.Missing(art)
	unpack := map[v1.Hash]modelkit.Entry{}
	for _, e := range art.Entries {
		if e.Unpack {
			unpack[e.Digest] = e
		}
	}
	var need int64
	for _, desc := range missing {
		if !d.store.HasBlob(desc.Digest) {
			need += desc.Size - d.store.Partial(desc.Digest) // a resumed download needs only the rest
		}
		if e, ok := unpack[desc.Digest]; ok {
			need += e.Size
			if e.Compression != extract.Uncompressed {
				need += e.Size
			}
		}
	}
	for _, e := range art.Entries {
		if !e.Unpack && e.Mode != 0 {
			need += e.Size // a copy of its blob, with its own mode
		}
	}
	return missing, need
}

// checkSpace fails when need bytes do not fit on stateDir's file system.
func (d *Driver) checkSpace(name string, need int64) error {
	if need <= 0 {
		return nil
	}
	free, err := d.opts.Free(d.state)
	if err != nil {
		return err
	}
	if need > free {
		return fmt.Errorf("%w: model %s needs %s, %s free on %s; free space there, or keep fewer versions (models.keepVersions)",
			store.ErrNoSpace, name, printable.HumanBytes(need), printable.HumanBytes(free), d.state)
	}
	return nil
}

// fetch downloads what art needs and the store lacks, after checking that
// it and the room to unpack it fit on the disk, unpacks its tar layers
// into trees (at most limit bytes in all), and returns the bytes
// downloaded. progress, when not nil, is told how each blob moves (the
// driver's Meter otherwise).
func (d *Driver) fetch(ctx context.Context, m render.Model, art *modelkit.Artifact, progress transport.Progress, limit int64) (int64, error) {
	missing, need := d.need(art)
	if err := d.checkSpace(m.Name, need); err != nil {
		return 0, err
	}
	if len(missing) == 0 {
		return 0, nil
	}
	// By repository: a base ModelKit's layers come from its own.
	byRepo := map[string][]v1.Descriptor{}
	for _, desc := range missing {
		r := art.BlobRepo(desc.Digest)
		byRepo[r] = append(byRepo[r], desc)
	}
	start := d.now()
	opts := d.opts.Registry
	opts.Progress = progress
	var tally *transport.Tally
	if progress == nil && d.opts.Meter != nil {
		tally = transport.NewTally(planner.ModelID(m.Name), missing, d.opts.Meter)
		opts.Progress = tally
	}
	budget := &extract.Budget{Limit: limit}
	var n int64
	var err error
	for _, r := range slices.Sorted(maps.Keys(byRepo)) {
		ref := cmp.Or(r, m.Ref)
		var repo name.Repository
		if repo, err = d.repository(ref); err != nil {
			break
		}
		var got int64
		got, err = d.store.Pull(ctx, repo, art, byRepo[r], d.opts.Parallel, budget, opts)
		n += got
		if err != nil {
			d.tooLarge(ctx, m, limit, err)
			err = fmt.Errorf("pull %s: %w", ref, err)
			break
		}
	}
	if tally != nil {
		tally.Done()
	}
	if err != nil {
		return n, err
	}
	d.log.InfoContext(ctx, "model downloaded", logKeyResource, planner.ModelID(m.Name), "bytes", n, "blobs", len(missing),
		"duration", d.now().Sub(start).Round(time.Millisecond).String())
	return n, nil
}

// materialise builds a new version folder for art, unpacking at most limit
// bytes, and fingerprints it.
func (d *Driver) materialise(ctx context.Context, rec *record, m render.Model, art *modelkit.Artifact, limit int64) (version, error) {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	v := version{
		Dir:     art.Digest.Hex[:16] + "-" + hex.EncodeToString(suffix[:]),
		Digest:  m.Digest,
		Tag:     m.Tag,
		Include: art.Included(),
		Bases:   render.BaseStrings(art.Bases),
	}
	if v.Digest != art.Digest.String() {
		return v, fmt.Errorf("%s: manifest %s read for digest %s", planner.ModelID(rec.Name), art.Digest, v.Digest)
	}
	for _, b := range art.Blobs() {
		v.Blobs = append(v.Blobs, b.Digest.String())
	}
	slices.Sort(v.Blobs)
	v.Blobs = slices.Compact(v.Blobs)
	if err := os.MkdirAll(d.dir.Model(rec.Name), atomicfile.DirMode); err != nil {
		return v, err
	}
	root := d.dir.Version(rec.Name, v.Dir)
	built, err := d.store.Build(ctx, art, root, limit)
	if err != nil {
		_ = removeTree(root)
		return v, fmt.Errorf("%s: %w", planner.ModelID(rec.Name), err)
	}
	for _, sp := range built.Skipped {
		v.Skipped = append(v.Skipped, sp.String())
	}
	if len(v.Skipped) > 0 {
		d.log.WarnContext(ctx, "model version built without the special files of its layers", logKeyResource, planner.ModelID(rec.Name),
			logKeyDigest, m.Digest, logKeySkipped, skippedNote(v.Skipped))
	}
	found, err := walkVersion(root)
	if err != nil {
		return v, err
	}
	// A file linked to (or copied from) its blob has the blob's digest, a
	// hard link to a tar layer's tree file the digest the tree's record
	// gives it; anything else (a copy across file systems, a ModelKit's
	// Kitfile) is hashed.
	linked := map[string]string{}
	for _, e := range art.Entries {
		if !e.Unpack {
			linked[e.Path] = e.Digest.String()
		}
	}
	trees := treeFilesByInode(d.store.TreeFiles(art))
	for _, p := range slices.Sorted(maps.Keys(found)) {
		st := found[p]
		if st.Type == "" {
			full := filepath.Join(root, filepath.FromSlash(p))
			if dg, ok := linked[p]; ok {
				st.Digest = dg
			} else if dg, ok := trees.digest(st.Ino, full); ok {
				st.Digest = dg
			} else if st.Digest, err = hashFile(full); err != nil {
				return v, err
			}
		}
		v.Entries = append(v.Entries, st)
	}
	v.VerifiedAt = d.now()
	return v, nil
}

// treeInodes are the files of tar layers' trees by inode, with their
// digests.
type treeInodes map[uint64][]treeFile

type treeFile struct {
	fi     os.FileInfo
	digest string
}

// treeFilesByInode stats the tree files (path → digest).
func treeFilesByInode(files map[string]string) treeInodes {
	out := treeInodes{}
	for p, dg := range files {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		ino, _, _ := statIDs(fi)
		out[ino] = append(out[ino], treeFile{fi, dg})
	}
	return out
}

// digest returns the digest of the tree file the version file at p, of
// inode ino, is a hard link to.
func (t treeInodes) digest(ino uint64, p string) (string, bool) {
	cands := t[ino]
	if ino == 0 || len(cands) == 0 { // 0: no inodes here
		return "", false
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return "", false
	}
	for _, c := range cands {
		if os.SameFile(c.fi, fi) {
			return c.digest, true
		}
	}
	return "", false
}
