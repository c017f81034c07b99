package model

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/confine"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/store"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/oci/verify"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Options say how models are pulled, kept and checked.
type Options struct {
	Registry transport.Options
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
	// Free says what a folder's file system has free; nil asks the file
	// system (statfs).
	Free func(dir string) (int64, error)
	// Meter, when set, is shown how the download of each model moves.
	Meter transport.Meter
	// Verify is the signature every model must carry (models.verify); a
	// model's own verify adds to it. Verifier checks them; nil with
	// Verify or a model's verify set holds the model.
	Verify   *manifest.ArtifactVerify
	Verifier *verify.Verifier
}

// Driver pulls model artifacts into the blob store, materialises each
// version as a folder in stateDir/models/NAME, and points the model's
// stable path (a symlink) at the active one. The stable path is the
// declared path, confined like a file to allowPaths under root, or
// stateDir/models/NAME/current. A Driver serves one tick: it reads each
// model's record once.
type Driver struct {
	tree   *confine.Tree
	dir    statedir.Models
	state  string // stateDir
	store  *store.Store
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	loaded atomic.Int64 // bytes downloaded

	mu       sync.Mutex
	records  map[string]*record            // by name, read once per driver
	arts     map[string]*modelkit.Artifact // by digest, as read this tick
	prepared map[string]string             // model name → version folder ready to activate
	// quarantined holds the releases rolled back on this node, read once.
	quarantined map[string]applier.Quarantined
	// staged holds the blobs of the release staging in the background
	// (see Stage), kept from garbage collection across ticks.
	staged map[string]bool
	// dropped holds the blobs of releases Unstage let go, whose partial
	// downloads DropPartials removes.
	dropped map[string]bool
	// keptDigests holds the digests of models whose blobs this tick keeps (see
	// Keep).
	keptDigests map[string]bool
}

var (
	_ applier.Driver     = (*Driver)(nil)
	_ applier.Preparer   = (*Driver)(nil)
	_ applier.Finisher   = (*Driver)(nil)
	_ applier.Undoer     = (*Driver)(nil)
	_ applier.Downloader = (*Driver)(nil)
	_ render.Resolver    = (*Driver)(nil)
)

// New returns a model driver keeping its store and versions in stateDir;
// tree confines declared model paths.
func New(stateDir string, tree *confine.Tree, opts Options, log *slog.Logger) (*Driver, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	blobs, err := store.NewStore(stateDir, log)
	if err != nil {
		return nil, err
	}
	if opts.Platform.Architecture == "" {
		opts.Platform = modelkit.NodePlatform()
	}
	if opts.VerifyInterval <= 0 {
		opts.VerifyInterval = manifest.DefaultVerifyInterval
	}
	if opts.Free == nil {
		opts.Free = store.FreeBytes
	}
	return &Driver{
		tree: tree, dir: statedir.Dir(stateDir).Models(), state: stateDir, store: blobs, opts: opts, log: log, now: time.Now,
		records: map[string]*record{}, arts: map[string]*modelkit.Artifact{}, prepared: map[string]string{},
	}, nil
}

// Kind returns planner.KindModel.
func (d *Driver) Kind() planner.Kind { return planner.KindModel }

// Downloaded returns the bytes this driver downloaded from registries.
func (d *Driver) Downloaded() int64 { return d.loaded.Load() }

// record returns the record of model name, read once.
func (d *Driver) record(name string) (*record, error) {
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

func (d *Driver) setRecord(r *record) error {
	if err := r.save(d.dir); err != nil {
		return fmt.Errorf("save model record: %w", err)
	}
	d.mu.Lock()
	d.records[r.Name] = r
	d.mu.Unlock()
	return nil
}

// repository is the repository a model is pulled from.
func (d *Driver) repository(ref string) (name.Repository, error) {
	repo, err := name.NewRepository(render.Repository(ref), d.opts.Registry.NameOptions(ref)...)
	if err != nil {
		return name.Repository{}, fmt.Errorf("model ref %q: %w", ref, err)
	}
	return repo, nil
}

// artifact reads the manifest of m's digest, fetching it into the store
// when needed; it is read once per tick.
func (d *Driver) artifact(ctx context.Context, m render.Model) (*modelkit.Artifact, error) {
	d.mu.Lock()
	art := d.arts[m.Digest]
	d.mu.Unlock()
	if art != nil {
		return art, nil
	}
	h, err := v1.NewHash(m.Digest)
	if err != nil {
		return nil, err
	}
	repo, err := d.repository(m.Ref)
	if err != nil {
		return nil, err
	}
	art, n, err := d.store.FetchArtifact(ctx, repo, h, d.opts.Platform, d.opts.Registry)
	d.loaded.Add(n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", planner.ModelID(m.Name), err)
	}
	d.mu.Lock()
	d.arts[m.Digest] = art
	d.mu.Unlock()
	return art, nil
}

// selected returns what m's include selects of its artifact (all of it
// without an include): the blobs to download and the files to write. An
// include matching no file is an error naming the pattern.
func (d *Driver) selected(ctx context.Context, m render.Model) (*modelkit.Artifact, error) {
	art, err := d.artifact(ctx, m)
	if err != nil {
		return nil, err
	}
	sel, err := art.Include(m.Include)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", planner.ModelID(m.Name), err)
	}
	return sel, nil
}

// spec returns the render.Model an action or observation was given.
func spec(id string, s any) (render.Model, error) {
	m, ok := s.(render.Model)
	if !ok {
		return render.Model{}, fmt.Errorf("%s: want a render.Model, got %T", id, s)
	}
	return m, nil
}
