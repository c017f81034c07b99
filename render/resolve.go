package render

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/planner"
)

// Resolver pins a declared model to what the planner compares for it. On
// a device the model driver resolves against its registry and the version
// active on the node; in CI a Registry or the Declared refs serve.
type Resolver interface {
	Resolve(ctx context.Context, m manifest.Model) (Resolution, error)
}

// Resolution is a model ref pinned for one render.
type Resolution struct {
	Digest string // sha256:… of the manifest or index (the ref itself when unresolved)
	Tag    string // the tag it resolved through; "" for a digest ref
	// Reason says why the digest is not the active one, as plans print it
	// (see ModelReason); "" when it is, or when nothing is active to
	// compare with and the resolver does not say.
	Reason string
	// Offline, when set, says why the registry could not be asked while
	// the ref is the one the active version was pulled for: the model
	// stays at the digest active on the node, which Digest names. The
	// device is offline; that is no failure.
	Offline error
	// Held, when set, says why the model cannot take its declared ref now
	// (a new ref, or nothing active yet, and the registry could not be
	// asked): Digest is the ref as declared, and the model and what uses
	// it are left as they are on the node.
	Held error
	// Quarantined, when set, says why the newest version the ref or
	// policy names was passed over: its digest was rolled back on this
	// node. Digest is then the highest version that was not, or the one
	// active (an image: running) on the node; with neither, the
	// resolution is held.
	Quarantined error
	// ActiveUnverified, when set, says that the version active on the
	// node (which Digest names) no longer carries the signatures verify
	// asks for now (see verify.ActiveWarning): it stays, and a new
	// version must verify. It is a warning.
	ActiveUnverified error
	// Skips are the versions a semver policy passed over, highest first:
	// rolled back on this node, or not signed as verify asks (see Skip).
	Skips []Skip
	// Download is what activating the version downloads: the bytes of
	// its artifact not in the store yet; 0 when it is active or staged.
	Download int64
	// Files, when set, are every file of the model's artifact that its
	// include selects (read from its manifest, which has no tar layer):
	// ${model:NAME}/FILE is checked against them.
	Files []string
	// Bases, when the resolver read the version's manifest, are the base
	// ModelKits its model comes from, pinned: "REF → sha256:…" (see
	// modelkit.Artifact.Bases).
	Bases []string
	// Pull, for an image, says that the node does not have it yet:
	// activating it pulls it (its size is the engine's to know).
	Pull bool
}

// Declared plans models by their declaration, without registries: a
// model's digest field is its ref (and policy) as written, so it changes
// only when the declaration does. CI uses it when not told to resolve.
type Declared struct{}

// Resolve returns m's ref as declared.
func (Declared) Resolve(_ context.Context, m manifest.Model) (Resolution, error) {
	v := m.Ref
	if p := policy(m); p != "" {
		v += " (semver " + p + ")"
	}
	return Resolution{Digest: v}, nil
}

// Registry resolves models in their registries with no node: each tag or
// semver policy to a digest (one HEAD, or a tag list), and, with Sizes,
// what pulling the version costs from its manifest (no layer is read). A
// model's include is checked against the manifest, with Sizes or not.
// Each distinct ref is asked once. It is safe for concurrent use.
type Registry struct {
	Options  transport.Options
	Platform v1.Platform // zero: this machine's
	Sizes    bool

	mu   sync.Mutex
	done map[[3]string]registryResult
	// sizes holds, by manifest digest, the size of each layer of the
	// version it names (with Sizes).
	sizes map[string]map[v1.Hash]int64
}

// Missing returns the bytes of the version digest names that the version
// base does not hold already (layers by digest), as a device running base
// downloads them; false when either was not resolved with Sizes.
func (r *Registry) Missing(digest, base string) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	head, ok := r.sizes[digest]
	have, ok2 := r.sizes[base]
	if !ok || !ok2 {
		return 0, false
	}
	var n int64
	for h, size := range head {
		if _, ok := have[h]; !ok {
			n += size
		}
	}
	return n, true
}

type registryResult struct {
	res Resolution
	err error
}

// Resolve pins m in its registry.
func (r *Registry) Resolve(ctx context.Context, m manifest.Model) (Resolution, error) {
	key := [3]string{m.Ref, policy(m), FormatInclude(m.Include)}
	r.mu.Lock()
	got, ok := r.done[key]
	r.mu.Unlock()
	if ok {
		return got.res, got.err
	}
	res, err := r.resolve(ctx, m)
	if ctx.Err() != nil {
		return res, err // not worth keeping
	}
	r.mu.Lock()
	if r.done == nil {
		r.done = map[[3]string]registryResult{}
	}
	r.done[key] = registryResult{res, err}
	r.mu.Unlock()
	return res, err
}

func (r *Registry) resolve(ctx context.Context, m manifest.Model) (Resolution, error) {
	pinned, err := transport.Resolve(ctx, m.Ref, policy(m), r.Options)
	if err != nil {
		return Resolution{}, err
	}
	res := Resolution{Digest: pinned.Digest, Tag: pinned.Tag}
	if !r.Sizes && len(m.Include) == 0 {
		return res, nil
	}
	repo, err := name.NewRepository(Repository(m.Ref), r.Options.NameOptions(m.Ref)...)
	if err != nil {
		return Resolution{}, fmt.Errorf("model ref %q: %w", m.Ref, err)
	}
	h, err := v1.NewHash(pinned.Digest)
	if err != nil {
		return Resolution{}, err
	}
	platform := r.Platform
	if platform.Architecture == "" {
		platform = modelkit.NodePlatform()
	}
	art, err := modelkit.Inspect(ctx, repo, h, platform, r.Options)
	if err != nil {
		return Resolution{}, err
	}
	if art, err = art.Include(m.Include); err != nil {
		return Resolution{}, err
	}
	if files, ok := art.Files(); ok && len(m.Include) > 0 {
		res.Files = files
	}
	res.Bases = BaseStrings(art.Bases)
	if !r.Sizes {
		return res, nil
	}
	res.Reason = ModelReason(Model{Ref: m.Ref, Policy: policy(m), Digest: pinned.Digest, Tag: pinned.Tag, Bases: res.Bases}, nil, art.Size())
	sizes := make(map[v1.Hash]int64, len(art.Entries))
	for _, e := range art.Entries {
		sizes[e.Digest] = e.Size
	}
	r.mu.Lock()
	if r.sizes == nil {
		r.sizes = map[string]map[v1.Hash]int64{}
	}
	r.sizes[pinned.Digest] = sizes
	r.mu.Unlock()
	return res, nil
}

// Active is the version of a model active on a node, as its driver
// recorded it.
type Active struct {
	Ref, Policy string // the declaration it was pulled for
	Digest, Tag string
	Include     []string // what its folder holds of the version; nil: all
	Bases       []string // the base ModelKits it was pinned to (see Model.Bases)
}

// BaseStrings writes the base ModelKits of a version as Model.Bases
// holds them; nil for none.
func BaseStrings(bases []modelkit.Base) []string {
	var out []string
	for _, b := range bases {
		out = append(out, b.String())
	}
	return out
}

// ModelReason says why a model's digest is m.Digest, as plans print it:
// "sha256:ab… → sha256:cd… (new tag v8.4 matches >=8.0.0 <9), 1.0 kB to
// download", or with nothing active "REF:TAG → sha256:cd…, …", each base
// ModelKit of the version following as ", base REF → sha256:…". download is
// the bytes pulling it still costs; a negative one (a held model) is not
// printed.
func ModelReason(m Model, active *Active, download int64) string {
	var b strings.Builder
	tagged := m.Ref
	if m.Policy != "" {
		tagged += ":" + m.Tag
	}
	if active == nil {
		b.WriteString(tagged + " → " + m.Digest)
	} else {
		b.WriteString(planner.ShortDigest(active.Digest) + " → " + planner.ShortDigest(m.Digest))
		switch {
		case active.Ref != m.Ref || active.Policy != m.Policy:
			fmt.Fprintf(&b, " (ref %s)", tagged)
		case active.Digest == m.Digest:
			fmt.Fprintf(&b, " (include %s)", orAll(m.Include))
		case m.Policy != "" && active.Tag != m.Tag:
			fmt.Fprintf(&b, " (new tag %s matches %s)", m.Tag, m.Policy)
		case m.Tag != "":
			fmt.Fprintf(&b, " (tag %s moved)", m.Tag)
		}
	}
	for _, base := range m.Bases {
		fmt.Fprintf(&b, ", base %s", base)
	}
	switch {
	case download < 0:
	case download == 0:
		b.WriteString(", nothing to download")
	default:
		fmt.Fprintf(&b, ", %s to download", printable.HumanBytes(download))
	}
	return b.String()
}

// orAll prints an include, or "(all files)" for none.
func orAll(include []string) string {
	if len(include) == 0 {
		return "(all files)"
	}
	return FormatInclude(include)
}

// Repository strips the tag or digest from a model ref.
func Repository(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref
}

func policy(m manifest.Model) string {
	if m.Policy == nil {
		return ""
	}
	return m.Policy.Semver
}
