package applier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci"
	"github.com/tend-dev/tend/planner"
)

// ModelOptions say how models are pulled, kept and checked.
type ModelOptions struct {
	Registry oci.Options
	// KeepVersions is how many versions besides the active one stay
	// materialised for a rollback.
	KeepVersions int
	// VerifyInterval is how often every file of an active version is
	// re-hashed; zero means manifest.DefaultVerifyInterval.
	VerifyInterval time.Duration
	// Parallel bounds the blobs of one model downloaded at once.
	Parallel int
	// Platform picks a manifest from an image index; the zero value means
	// this node's platform.
	Platform v1.Platform
	// Unresolved plans without registries (tend diff without --resolve):
	// a model's field is its ref (and policy) as declared, so a model
	// changes only when its declaration does.
	Unresolved bool
}

// ModelDriver pulls model artifacts into the blob store, materialises each
// version as a folder in stateDir/models/NAME, and points the model's
// stable path (a symlink) at the active one. The stable path is the
// declared path, confined like a file to allowPaths under root, or
// stateDir/models/NAME/current.
//
// Pulling is split from activation: Prepare downloads and materialises
// (which changes nothing anyone uses), Apply swaps the symlink, so the
// applier pulls every model before it touches anything.
type ModelDriver struct {
	files  *FileDriver
	dir    string // stateDir/models
	state  string // stateDir
	store  *oci.Store
	opts   ModelOptions
	log    *slog.Logger
	now    func() time.Time
	loaded atomic.Int64 // bytes downloaded

	mu       sync.Mutex
	wanted   map[string]*wantedModel // by name, from Resolve
	records  map[string]*modelRecord // by name, read once per driver
	held     []error
	prepared map[string]string // model name → version folder ready to activate
}

// wantedModel is a declared model pinned to a digest.
type wantedModel struct {
	spec manifest.Model
	res  oci.Resolved
	repo name.Repository
	art  *oci.Artifact // nil until the manifest is read
	hold bool          // the registry failed; the active version is kept
}

var (
	_ Driver   = (*ModelDriver)(nil)
	_ Preparer = (*ModelDriver)(nil)
	_ Finisher = (*ModelDriver)(nil)
)

// NewModelDriver returns a model driver keeping its store and versions in
// stateDir; files confines declared model paths.
func NewModelDriver(stateDir string, files *FileDriver, opts ModelOptions, log *slog.Logger) (*ModelDriver, error) {
	store, err := oci.NewStore(stateDir, log)
	if err != nil {
		return nil, err
	}
	if opts.Platform.Architecture == "" {
		opts.Platform = oci.NodePlatform()
	}
	if opts.VerifyInterval <= 0 {
		opts.VerifyInterval = manifest.DefaultVerifyInterval
	}
	return &ModelDriver{
		files: files, dir: modelsDir(stateDir), state: stateDir, store: store, opts: opts, log: log, now: time.Now,
		wanted: map[string]*wantedModel{}, records: map[string]*modelRecord{}, prepared: map[string]string{},
	}, nil
}

// Kind returns planner.KindModel.
func (d *ModelDriver) Kind() planner.Kind { return planner.KindModel }

// Downloaded returns the bytes this driver downloaded from registries.
func (d *ModelDriver) Downloaded() int64 { return d.loaded.Load() }

// Held returns why models were held at their active version because their
// registry could not be asked, or nil.
func (d *ModelDriver) Held() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.held...)
}

// record returns the record of model name, read once.
func (d *ModelDriver) record(name string) (*modelRecord, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.records[name]; ok {
		return r, nil
	}
	r, err := loadRecord(d.dir, name)
	if err != nil {
		return nil, err
	}
	d.records[name] = r
	return r, nil
}

func (d *ModelDriver) setRecord(r *modelRecord) error {
	if err := r.save(d.dir); err != nil {
		return fmt.Errorf("save model record: %w", err)
	}
	d.mu.Lock()
	d.records[r.Name] = r
	d.mu.Unlock()
	return nil
}

// Resolve pins m to a digest in its registry and returns its resource. A
// ref by digest whose manifest is in the store needs no registry. When the
// registry cannot be asked and the active version was pulled for the same
// ref, the model is held there: its resource asks for the active digest
// and Held says why.
func (d *ModelDriver) Resolve(ctx context.Context, m manifest.Model) (planner.Resource, error) {
	id := ModelID(m.Name)
	rec, err := d.record(m.Name)
	if err != nil {
		return planner.Resource{}, err
	}
	policy := ""
	if m.Policy != nil {
		policy = m.Policy.Semver
	}
	w := &wantedModel{spec: m}
	if d.opts.Unresolved {
		value := m.Ref
		if policy != "" {
			value += " (semver " + policy + ")"
		}
		d.mu.Lock()
		d.wanted[m.Name] = w
		d.mu.Unlock()
		return planner.Resource{ID: id, Kind: planner.KindModel, Fields: []planner.Field{{Name: FieldDigest, Value: value}}}, nil
	}
	w.res, err = d.resolve(ctx, m.Ref, policy)
	if err != nil {
		act := rec.active()
		if act == nil || rec.Ref != m.Ref || rec.Policy != policy || errors.Is(err, oci.ErrNotFound) && policy == "" {
			return planner.Resource{}, err
		}
		w.hold = true
		w.res = oci.Resolved{Ref: m.Ref, Tag: act.Tag, Digest: act.Digest}
		d.mu.Lock()
		d.held = append(d.held, fmt.Errorf("%s held at %s (%s): %w", id, short(act.Digest), m.Ref, err))
		d.mu.Unlock()
	}
	w.repo, err = name.NewRepository(repository(w.res.Ref), d.nameOptions(m.Ref)...)
	if err != nil {
		return planner.Resource{}, fmt.Errorf("model ref %q: %w", m.Ref, err)
	}
	d.mu.Lock()
	d.wanted[m.Name] = w
	d.mu.Unlock()
	r := planner.Resource{ID: id, Kind: planner.KindModel, Fields: []planner.Field{{Name: FieldDigest, Value: w.res.Digest}}}
	if act := rec.active(); act == nil || act.Digest != w.res.Digest {
		if r.Reason, err = d.explain(ctx, w, rec, policy); err != nil {
			return planner.Resource{}, err
		}
	}
	return r, nil
}

func (d *ModelDriver) resolve(ctx context.Context, ref, policy string) (oci.Resolved, error) {
	if policy == "" {
		if r, err := name.NewDigest(ref, d.nameOptions(ref)...); err == nil {
			if h, err := v1.NewHash(r.DigestStr()); err == nil && d.store.Has(h) {
				return oci.Resolved{Ref: ref, Digest: h.String()}, nil
			}
		}
	}
	return oci.Resolve(ctx, ref, policy, d.opts.Registry)
}

// explain says why a model's digest is not the active one and what pulling
// it costs: "sha256:ab… → sha256:cd… (new tag v8.4 matches >=8.0.0 <9),
// 1.0 kB to download". It reads the manifest (into the store) to count the
// bytes of the blobs not yet there.
func (d *ModelDriver) explain(ctx context.Context, w *wantedModel, rec *modelRecord, policy string) (string, error) {
	var b strings.Builder
	act := rec.active()
	tagged := w.res.Ref
	if policy != "" {
		tagged += ":" + w.res.Tag
	}
	if act == nil {
		b.WriteString(tagged + " → " + w.res.Digest)
	} else {
		b.WriteString(short(act.Digest) + " → " + short(w.res.Digest))
		switch {
		case rec.Ref != w.spec.Ref || rec.Policy != policy:
			fmt.Fprintf(&b, " (ref %s)", tagged)
		case policy != "" && act.Tag != w.res.Tag:
			fmt.Fprintf(&b, " (new tag %s matches %s)", w.res.Tag, policy)
		case w.res.Tag != "":
			fmt.Fprintf(&b, " (tag %s moved)", w.res.Tag)
		}
	}
	if w.hold {
		return b.String(), nil
	}
	art, err := d.artifact(ctx, w)
	if err != nil {
		return "", err
	}
	var missing int64
	for _, desc := range art.Blobs() {
		if !d.store.Has(desc.Digest) {
			missing += desc.Size
		}
	}
	if missing == 0 {
		b.WriteString(", nothing to download")
	} else {
		fmt.Fprintf(&b, ", %s to download", oci.HumanBytes(missing))
	}
	return b.String(), nil
}

// artifact reads w's manifest, fetching it into the store when needed.
func (d *ModelDriver) artifact(ctx context.Context, w *wantedModel) (*oci.Artifact, error) {
	if w.art != nil {
		return w.art, nil
	}
	h, err := v1.NewHash(w.res.Digest)
	if err != nil {
		return nil, err
	}
	art, n, err := d.store.FetchArtifact(ctx, w.repo, h, d.opts.Platform, d.opts.Registry)
	d.loaded.Add(n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ModelID(w.spec.Name), err)
	}
	w.art = art
	return art, nil
}

// Observe reports the version the model's stable path points at. The
// digest is the active version's when its folder is exactly as
// materialised; a changed folder, a symlink pointed elsewhere, or something
// else at the path differs from any digest, and the state's Note says how.
func (d *ModelDriver) Observe(ctx context.Context, id string) (planner.State, error) {
	if err := ctx.Err(); err != nil {
		return planner.State{}, err
	}
	name := ModelName(id)
	rec, err := d.record(name)
	if err != nil {
		return planner.State{}, err
	}
	d.mu.Lock()
	w := d.wanted[name]
	d.mu.Unlock()
	var linkPath string
	switch {
	case w != nil:
		linkPath = w.spec.Path
	case rec != nil:
		linkPath = rec.Path
	default:
		return planner.State{}, nil
	}
	dir, rel, err := d.linkDir(name, linkPath, false)
	if errors.Is(err, fs.ErrNotExist) {
		return planner.State{}, nil
	}
	if err != nil {
		return planner.State{}, err
	}
	defer dir.Close()
	fi, err := dir.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return planner.State{}, nil
	}
	if err != nil {
		return planner.State{}, err
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		what := contentOther
		if fi.IsDir() {
			what = contentDirectory
		} else if fi.Mode().IsRegular() {
			what = "<regular file>"
		}
		return modelState(what, ""), nil
	}
	target, err := dir.Readlink(rel)
	if err != nil {
		return planner.State{}, err
	}
	var v *modelVersion
	if rec != nil && filepath.Dir(target) == filepath.Join(d.dir, name) {
		v = rec.version(filepath.Base(target))
	}
	if v == nil {
		return modelState("symlink to "+target, "symlink points to "+target+", not to a version tend keeps"), nil
	}
	changes, err := d.check(rec, v, false)
	if err != nil {
		return planner.State{}, err
	}
	if len(changes) > 0 {
		return modelState(v.Digest+" (modified)", "model folder changed on node: "+summarise(changes)), nil
	}
	return modelState(v.Digest, ""), nil
}

func modelState(digest, note string) planner.State {
	return planner.State{Exists: true, Fields: []planner.Field{{Name: FieldDigest, Value: digest}}, Note: note}
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
func (d *ModelDriver) check(rec *modelRecord, v *modelVersion, deep bool) ([]string, error) {
	root := filepath.Join(d.dir, rec.Name, v.Dir)
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
		switch {
		case !ok:
			changes = append(changes, want.Path+" deleted")
			continue
		case got.Type != want.Type:
			changes = append(changes, want.Path+" replaced")
			continue
		case got.Mode != want.Mode:
			changes = append(changes, want.Path+" mode changed")
			continue
		case got.Type == "link" && got.Target != want.Target:
			changes = append(changes, want.Path+" points elsewhere")
			continue
		case got.Type != "":
			continue
		case got.Size != want.Size:
			changes = append(changes, want.Path+" edited")
			continue
		}
		if !deep && got.Ino == want.Ino && got.Mtime == want.Mtime && got.Ctime == want.Ctime {
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

// Prepare pulls the version a.Resource needs and materialises it, changing
// nothing in use: the blobs it lacks are downloaded (after a check that
// they fit on the disk) and the version's folder is built beside the
// active one. A version kept from before and intact is used as it is.
func (d *ModelDriver) Prepare(ctx context.Context, a planner.Action, _ any) error {
	if a.Type != planner.Create && a.Type != planner.Update {
		return nil
	}
	name := ModelName(a.Resource)
	d.mu.Lock()
	w, done := d.wanted[name], d.prepared[name] != ""
	d.mu.Unlock()
	if done {
		return nil
	}
	if w == nil {
		return errors.New("no declaration for it: call Desired before Apply with the same device")
	}
	rec, err := d.record(name)
	if err != nil {
		return err
	}
	if rec == nil {
		rec = &modelRecord{Name: name}
	}
	// A kept version of that digest, intact, is activated as it is: a
	// rollback, or a symlink to repair.
	damaged := false
	for i := range rec.Versions {
		v := &rec.Versions[i]
		if v.Digest != w.res.Digest {
			continue
		}
		changes, err := d.check(rec, v, false)
		if err != nil {
			return err
		}
		if len(changes) == 0 {
			d.mu.Lock()
			d.prepared[name] = v.Dir
			d.mu.Unlock()
			return nil
		}
		damaged = true
	}
	art, err := d.artifact(ctx, w)
	if err != nil {
		return err
	}
	if damaged {
		// Files are hard links to blobs, so an edit in place may have
		// changed the blob too: drop any blob that no longer matches.
		for _, e := range art.Entries {
			if err := d.store.Verify(e.Digest); err != nil {
				d.log.WarnContext(ctx, "blob damaged; downloading it again", logKeyResource, a.Resource, logKeyDigest, e.Digest.String())
			}
		}
	}
	if err := d.fetch(ctx, w, art); err != nil {
		return err
	}
	v, err := d.materialise(ctx, rec, w, art)
	if err != nil {
		return err
	}
	rec.Versions = append(rec.Versions, v)
	if err := d.setRecord(rec); err != nil {
		return err
	}
	d.mu.Lock()
	d.prepared[name] = v.Dir
	d.mu.Unlock()
	return nil
}

// fetch downloads the blobs of art not in the store, after checking that
// they and the room to unpack them fit on the disk.
func (d *ModelDriver) fetch(ctx context.Context, w *wantedModel, art *oci.Artifact) error {
	var missing []v1.Descriptor
	var need int64
	for _, desc := range art.Blobs() {
		if !d.store.Has(desc.Digest) {
			missing = append(missing, desc)
			need += desc.Size - d.store.Partial(desc.Digest) // a resumed download needs only the rest
		}
	}
	for _, e := range art.Entries {
		if e.Unpack {
			// Unpacked content lands in new files: allow for a
			// compression ratio of 2 on compressed layers.
			need += e.Size
			if e.Compression != oci.Uncompressed {
				need += e.Size
			}
		}
	}
	if need > 0 {
		if err := oci.CheckSpace(d.state, "model "+w.spec.Name, need); err != nil {
			return fmt.Errorf("%w; free space there, or keep fewer versions (models.keepVersions)", err)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	start := d.now()
	n, err := d.store.FetchAll(ctx, w.repo, missing, d.opts.Parallel, d.opts.Registry)
	d.loaded.Add(n)
	if err != nil {
		return fmt.Errorf("pull %s: %w", w.res.Ref, err)
	}
	d.log.InfoContext(ctx, "model downloaded", logKeyResource, ModelID(w.spec.Name), "bytes", n, "blobs", len(missing),
		"duration", d.now().Sub(start).Round(time.Millisecond).String())
	return nil
}

// materialise builds a new version folder for art and fingerprints it.
func (d *ModelDriver) materialise(ctx context.Context, rec *modelRecord, w *wantedModel, art *oci.Artifact) (modelVersion, error) {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	v := modelVersion{
		Dir:    art.Digest.Hex[:16] + "-" + hex.EncodeToString(suffix[:]),
		Digest: w.res.Digest,
		Tag:    w.res.Tag,
	}
	if v.Digest != art.Digest.String() {
		return v, fmt.Errorf("%s: manifest %s read for digest %s", ModelID(rec.Name), art.Digest, v.Digest)
	}
	for _, b := range art.Blobs() {
		v.Blobs = append(v.Blobs, b.Digest.String())
	}
	slices.Sort(v.Blobs)
	v.Blobs = slices.Compact(v.Blobs)
	if err := os.MkdirAll(filepath.Join(d.dir, rec.Name), dirMode); err != nil {
		return v, err
	}
	root := filepath.Join(d.dir, rec.Name, v.Dir)
	if err := d.store.Materialise(ctx, art, root); err != nil {
		_ = removeTree(root)
		return v, fmt.Errorf("%s: %w", ModelID(rec.Name), err)
	}
	found, err := walkVersion(root)
	if err != nil {
		return v, err
	}
	// A file linked to its blob has the blob's digest; anything else, from
	// an unpacked layer, is hashed.
	linked := map[string]string{}
	for _, e := range art.Entries {
		if !e.Unpack {
			linked[e.Path] = e.Digest.String()
		}
	}
	for _, p := range slices.Sorted(maps.Keys(found)) {
		st := found[p]
		if st.Type == "" {
			if dg, ok := linked[p]; ok {
				st.Digest = dg
			} else if st.Digest, err = hashFile(filepath.Join(root, filepath.FromSlash(p))); err != nil {
				return v, err
			}
		}
		v.Entries = append(v.Entries, st)
	}
	v.VerifiedAt = d.now()
	return v, nil
}

// Apply activates the prepared version of a model (Create, Update) by
// swapping its stable path to it, or removes a model (Delete): its symlink,
// when it still points into stateDir, and every version of it.
func (d *ModelDriver) Apply(ctx context.Context, a planner.Action, _ any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name := ModelName(a.Resource)
	switch a.Type {
	case planner.Create, planner.Update:
		if err := d.Prepare(ctx, a, nil); err != nil {
			return err
		}
		return d.activate(ctx, name)
	case planner.Delete:
		return d.remove(name)
	default:
		return fmt.Errorf("%s: a model cannot %s", a.Resource, a.Type)
	}
}

func (d *ModelDriver) activate(ctx context.Context, name string) error {
	d.mu.Lock()
	w, vdir := d.wanted[name], d.prepared[name]
	d.mu.Unlock()
	rec, err := d.record(name)
	if err != nil {
		return err
	}
	v := rec.version(vdir)
	if v == nil {
		return fmt.Errorf("%s: prepared version %s is not recorded", ModelID(name), vdir)
	}
	dir, rel, err := d.linkDir(name, w.spec.Path, true)
	if err != nil {
		return err
	}
	defer dir.Close()
	target := filepath.Join(d.dir, name, vdir)
	if err := traversable(d.state); err != nil {
		return err
	}
	// The active version first, then the others most recent first. Those
	// beyond KeepVersions go in Finish, once the whole plan has held: a
	// rollback swaps back to the version active before.
	policy := ""
	if w.spec.Policy != nil {
		policy = w.spec.Policy.Semver
	}
	versions := []modelVersion{*v}
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
	next := &modelRecord{Name: name, Ref: w.spec.Ref, Policy: policy, Path: w.spec.Path, Active: vdir, Versions: versions}
	if err := d.setRecord(next); err != nil {
		return err
	}
	if err := swapLink(dir, rel, target); err != nil {
		return fmt.Errorf("activate %s: %w", ModelID(name), err)
	}
	if rec.Path != w.spec.Path && rec.Active != "" {
		d.unlink(name, rec.Path) // the stable path moved: the old link goes
	}
	from := "none"
	if prev != nil {
		from = prev.Digest
	}
	d.log.InfoContext(ctx, "model activated", logKeyResource, ModelID(name), "ref", w.res.Ref, "tag", w.res.Tag,
		"digest", v.Digest, "previous", from, "path", target)
	return nil
}

// trim drops the versions of rec beyond the active one and KeepVersions
// others, and damaged copies of the active digest.
func (d *ModelDriver) trim(ctx context.Context, rec *modelRecord) error {
	act := rec.active()
	if act == nil {
		return nil
	}
	versions := []modelVersion{*act}
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
		if err := removeTree(filepath.Join(d.dir, rec.Name, o)); err != nil {
			d.log.WarnContext(ctx, "remove old model version", logKeyResource, ModelID(rec.Name), logKeyError, err.Error())
		}
	}
	// Removing links to shared blobs moved their ctime: refresh the
	// fingerprints, or the next tick would re-hash every shared file.
	return d.refresh(rec)
}

// refresh takes the new ctime of every file of rec's versions whose size,
// mtime and inode are unchanged: tend's own link operations on shared
// blobs move only the ctime.
func (d *ModelDriver) refresh(rec *modelRecord) error {
	for i := range rec.Versions {
		v := &rec.Versions[i]
		root := filepath.Join(d.dir, rec.Name, v.Dir)
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
func (d *ModelDriver) remove(name string) error {
	rec, err := d.record(name)
	if err != nil {
		return err
	}
	if rec != nil {
		d.unlink(name, rec.Path)
	}
	trash := filepath.Join(d.dir, ".removed-"+name)
	if err := os.Rename(filepath.Join(d.dir, name), trash); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", ModelID(name), err)
	}
	if err := removeTree(trash); err != nil {
		return fmt.Errorf("remove %s: %w", ModelID(name), err)
	}
	d.mu.Lock()
	d.records[name] = nil
	d.mu.Unlock()
	return nil
}

// unlink removes the symlink at a model's stable path p if it points into
// the model's folder, and prunes the folders that leaves empty.
func (d *ModelDriver) unlink(name, p string) {
	dir, rel, err := d.linkDir(name, p, false)
	if err != nil {
		return
	}
	defer dir.Close()
	target, err := dir.Readlink(rel)
	if err != nil || filepath.Dir(target) != filepath.Join(d.dir, name) {
		return
	}
	if dir.Remove(rel) != nil || p == "" {
		return
	}
	allow, _, _ := d.files.locate(FileID(p))
	if changed, err := d.files.prune(dir, allow, path.Dir(rel)); err == nil {
		_ = syncDir(dir, changed)
	}
}

// linkDir opens the folder holding model name's stable path: for a
// declared path p, its allowed directory (confined as files are), else the
// model's folder in stateDir. It returns the path of the link inside it.
func (d *ModelDriver) linkDir(name, p string, create bool) (*os.Root, string, error) {
	if p == "" {
		dir := filepath.Join(d.dir, name)
		if create {
			if err := os.MkdirAll(dir, dirMode); err != nil {
				return nil, "", err
			}
		}
		r, err := os.OpenRoot(dir)
		return r, defaultLink, err
	}
	allow, rel, err := d.files.locate(FileID(p))
	if err != nil {
		return nil, "", err
	}
	dir, err := d.files.openAllowed(allow, create)
	if err != nil {
		return nil, "", err
	}
	if create {
		if err := mkdirs(dir, path.Dir(rel)); err != nil {
			_ = dir.Close()
			return nil, "", confined(allow, err)
		}
	}
	return dir, rel, nil
}

// StablePath is the node path of model name's symlink: the declared path
// under root, or stateDir/models/NAME/current.
func (d *ModelDriver) StablePath(m manifest.Model) string {
	if m.Path == "" {
		return filepath.Join(d.dir, m.Name, defaultLink)
	}
	return d.files.nodePath(m.Path)
}

// swapLink points the symlink rel inside r at target atomically: a new link
// is made beside it and renamed over it, so the path always resolves to the
// old or the new version. A directory at rel is refused.
func swapLink(r *os.Root, rel, target string) error {
	if fi, err := r.Lstat(rel); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %s is a directory; a model's path is a symlink tend makes: remove it or declare another path",
			ErrNotRegular, path.Join(r.Name(), rel))
	}
	if cur, err := r.Readlink(rel); err == nil && cur == target {
		return nil
	}
	dirName, base := path.Split(rel)
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := dirName + tempPrefix + truncateName(base, tempBaseMax) + "-" + hex.EncodeToString(b[:])
	if err := r.Symlink(target, tmp); err != nil {
		return fmt.Errorf("create symlink in %s: %w", path.Join(r.Name(), dirName), unwrapPath(err))
	}
	if err := r.Rename(tmp, rel); err != nil {
		_ = r.Remove(tmp)
		return fmt.Errorf("rename %s to %s: %w", path.Join(r.Name(), tmp), path.Join(r.Name(), rel), unwrapLink(err))
	}
	return syncDir(r, dirName)
}

// Finish collects garbage after a plan applied in full: version folders no
// record keeps, models no longer recorded, blobs no kept version uses, and
// partial downloads (every declared model is whole by now).
//
// Nothing is collected while a model is held (its registry failed): its
// pending download must survive. Blobs and partial downloads of every
// declared model's artifact are kept in any case. A model that is neither
// declared nor deleted by the plan (its link was already gone) is removed
// here.
func (d *ModelDriver) Finish(ctx context.Context) error {
	d.mu.Lock()
	held := len(d.held) > 0
	keep := map[string]bool{}
	declared := map[string]bool{}
	for name, w := range d.wanted {
		declared[name] = true
		if w.art != nil {
			for _, b := range w.art.Blobs() {
				keep[b.Digest.String()] = true
			}
		}
	}
	d.mu.Unlock()
	if held {
		return nil
	}
	entries, err := os.ReadDir(d.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if strings.HasPrefix(e.Name(), ".removed-") {
			errs = append(errs, removeTree(filepath.Join(d.dir, e.Name())))
			continue
		}
		if !declared[e.Name()] {
			errs = append(errs, d.remove(e.Name()))
			continue
		}
		rec, err := loadRecord(d.dir, e.Name())
		if err == nil && rec != nil {
			err = d.trim(ctx, rec)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		folder := filepath.Join(d.dir, e.Name())
		if rec == nil {
			errs = append(errs, removeTree(folder))
			continue
		}
		kept := map[string]bool{recordFile: true, defaultLink: true}
		for _, v := range rec.Versions {
			kept[v.Dir] = true
			for _, b := range v.Blobs {
				keep[b] = true
			}
		}
		inside, _ := os.ReadDir(folder)
		for _, f := range inside {
			if !kept[f.Name()] {
				errs = append(errs, removeTree(filepath.Join(folder, f.Name())))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		// A record that cannot be read may hold blobs: keep them all.
		return err
	}
	n, freed, err := d.store.GC(keep)
	if n > 0 {
		d.log.InfoContext(ctx, "blobs collected", "blobs", n, "bytes", freed)
	}
	return err
}

// walkVersion stamps every entry under root, keyed by slash path.
func walkVersion(root string) (map[string]fileStamp, error) {
	if _, err := os.Lstat(root); err != nil {
		return nil, err
	}
	found := map[string]fileStamp{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		st := fileStamp{Path: filepath.ToSlash(rel), Mode: uint32(fi.Mode().Perm())}
		switch {
		case fi.IsDir():
			st.Type = "dir"
		case fi.Mode()&fs.ModeSymlink != 0:
			st.Type = "link"
			if st.Target, err = os.Readlink(p); err != nil {
				return err
			}
			st.Mode = 0
		case fi.Mode().IsRegular():
			st.Size = fi.Size()
			st.Ino, st.Mtime, st.Ctime = statIDs(fi)
		default:
			st.Type = "other"
		}
		found[st.Path] = st
		return nil
	})
	return found, err
}

// hashFile returns "sha256:<hex>" of the file at p.
func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	r, err := os.OpenRoot(filepath.Dir(p))
	if err != nil {
		return "", err
	}
	defer r.Close()
	return digestFile(r, filepath.Base(p), fi)
}

// removeTree removes p and everything under it, making read-only folders
// (as unpacked layers may have) writable first.
func removeTree(p string) error {
	err := os.RemoveAll(p)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	_ = filepath.WalkDir(p, func(q string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = os.Chmod(q, 0o755)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// short abbreviates a digest for plan lines: sha256:0123456789ab.
func short(digest string) string {
	if i := strings.IndexByte(digest, ':'); i >= 0 && len(digest) > i+13 {
		return digest[:i+13]
	}
	return digest
}

// repository strips the tag or digest from a model ref.
func repository(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref
}

func (d *ModelDriver) nameOptions(ref string) []name.Option {
	for _, h := range d.opts.Registry.Insecure {
		if strings.HasPrefix(ref, h+"/") {
			return []name.Option{name.Insecure}
		}
	}
	return nil
}
