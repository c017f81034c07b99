package ocisource

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/source"
)

// Bounds of a fleet artifact: its one layer as downloaded, and what it
// unpacks to. A fleet repo is text; these leave room for a large one. Its
// manifest, a few annotations and two descriptors (about 5 KiB with the
// ancestors tend publish lists), is kept beside the unpacked layer and read
// every tick: a registry may not make it megabytes of annotations.
const (
	MaxLayerBytes    = 64 << 20
	MaxUnpackedBytes = 512 << 20
	MaxManifestBytes = 64 << 10
)

// Source says which artifact holds a device's manifests and how far to
// trust it.
type Source struct {
	URL   string        // oci://HOST/REPO:TAG or oci://HOST/REPO@sha256:…
	Paths []source.Path // folders of the tree the device reads
	// LastApplied is the commit the node last applied ("" for none). A
	// target created before it is refused unless AllowRewind.
	LastApplied string
	AllowRewind bool
	// Quarantined holds commits this node rolled back, with why: such a
	// target is refused and the last applied commit held.
	Quarantined map[string]string
}

// Options configure Fetch.
type Options struct {
	Dir    string       // where artifacts are kept unpacked, e.g. stateDir/oci; created if missing
	Client *Client      // reaches the registry
	Logger *slog.Logger // nil = discard
	// Stage, when set with a background (a Fetcher's), downloads a new
	// layer in the background: Fetch returns a *source.StagingError
	// until it is whole, and calls Stage when its download ends.
	Stage func()
	// Verify, when set, checks the artifact's signatures before it is
	// read (see Fetcher.Verify): an error refuses the target, and the
	// last applied commit is held.
	Verify     func(ctx context.Context, repo name.Repository, digest string) error
	background *background
}

// Log keys.
const (
	logKeyURL      = "url"
	logKeyDigest   = "digest"
	logKeyRevision = "revision"
	logKeyFiles    = "files"
	logKeyError    = "error"
)

// Fetch resolves the artifact src.URL names to a manifest digest (one HEAD
// request for a tag, none for a digest), downloads and unpacks it into
// opts.Dir unless it is kept there already, and reads the manifest files
// under src's paths from it. It keeps the artifact of the last applied
// commit, which Applied and a hold read, and removes older ones.
//
// Like gitsource.Fetch, when the target cannot be used (the registry is
// unreachable, the tag is missing, the artifact is refused) and the
// artifact of the last applied commit is kept, it returns that one with
// the cause in Snapshot.Stale.
func Fetch(ctx context.Context, src Source, opts Options) (*source.Snapshot, error) {
	f := &fetcher{src: src, opts: opts, st: store{dir: opts.Dir}, log: opts.Logger}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.opts.Client == nil {
		return nil, errors.New("ocisource: no client")
	}
	ref, err := ParseURL(src.URL, opts.Client.opts)
	if err != nil {
		return nil, err
	}
	f.ref, f.shown = ref, Scheme+ref.String()
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("fleet artifacts folder: %w", err)
	}
	snap, digest, err := f.read(ctx)
	if err == nil {
		if perr := f.st.prune(src.LastApplied, digest); perr != nil {
			f.log.WarnContext(ctx, "could not remove older fleet artifacts", logKeyError, perr.Error())
		}
		return snap, nil
	}
	var staging *source.StagingError
	if errors.Is(ctx.Err(), context.Canceled) || errors.As(err, &staging) {
		return nil, err
	}
	if held := f.hold(err); held != nil {
		return held, nil
	}
	return nil, err
}

// Applied reads the manifest files of commit from the artifact kept in
// dir, with no registry: the revision a node applied, held while the
// registry or the target cannot be used.
func Applied(dir, url, commit string, paths []source.Path) (*source.Snapshot, error) {
	k, ok := store{dir: dir}.byCommit(commit)
	if !ok {
		return nil, fmt.Errorf("the fleet artifact of the applied commit %s is not kept in %s", source.ShortCommit(commit), dir)
	}
	files, err := k.files(paths, url)
	if err != nil {
		return nil, err
	}
	return &source.Snapshot{URL: url, Revision: source.Revision{Ref: k.Ref, Commit: k.Commit}, Files: files}, nil
}

// ParseURL reads oci://HOST/REPO:TAG or oci://HOST/REPO@sha256:… as a
// reference; a tag or digest must be given.
func ParseURL(u string, opts transport.Options) (name.Reference, error) {
	raw, ok := strings.CutPrefix(u, Scheme)
	if !ok {
		return nil, fmt.Errorf("source.url %q: not an oci:// URL", u)
	}
	ref, err := name.ParseReference(raw, append(opts.NameOptions(raw), name.StrictValidation)...)
	if err != nil {
		return nil, fmt.Errorf("source.url %q: %w; use oci://HOST/REPO:TAG or oci://HOST/REPO@sha256:DIGEST", u, err)
	}
	return ref, nil
}

// fetcher is one Fetch.
type fetcher struct {
	src   Source
	opts  Options
	st    store
	log   *slog.Logger
	ref   name.Reference
	shown string
}

// read resolves, downloads when needed, checks and reads the target.
func (f *fetcher) read(ctx context.Context) (*source.Snapshot, string, error) {
	digest := ""
	if d, ok := f.ref.(name.Digest); ok {
		digest = d.DigestStr()
	} else {
		desc, err := f.opts.Client.head(ctx, f.ref)
		if err != nil {
			return nil, "", transport.ExplainHead(ctx, f.ref, err, f.opts.Client.opts)
		}
		digest = desc.Digest.String()
	}
	if f.opts.Verify != nil {
		if err := f.opts.Verify(ctx, f.ref.Context(), digest); err != nil {
			return nil, "", fmt.Errorf("fleet artifact %s refused: %w", f.shown, err)
		}
	}
	k, ok := f.st.load(digest)
	fetched := !ok
	if ok {
		if err := f.check(ctx, k); err != nil {
			return nil, "", err
		}
	} else {
		key := f.ref.Context().String() + "@" + digest
		if err := f.opts.Client.refusal(key); err != nil {
			return nil, "", err
		}
		var err error
		if k, err = f.download(ctx, digest); err != nil {
			var r refusal
			if errors.As(err, &r) {
				f.opts.Client.refuse(key, r.error)
				return nil, "", r.error
			}
			return nil, "", err
		}
	}
	files, err := k.files(f.src.Paths, f.shown)
	if err != nil {
		return nil, "", err
	}
	msg := "unchanged"
	if fetched {
		msg = "fetched"
	}
	f.log.DebugContext(ctx, msg, logKeyURL, f.shown, logKeyDigest, digest, logKeyRevision, k.Commit, logKeyFiles, len(files))
	return &source.Snapshot{URL: f.shown, Revision: source.Revision{Ref: f.refName(k), Commit: k.Commit}, Files: files, Fetched: fetched}, digest, nil
}

// refName is the ref the snapshot is named by: the revision's, else the
// URL's tag ("" for a digest: shown as HEAD).
func (f *fetcher) refName(k *kept) string {
	if k.Ref != "" {
		return k.Ref
	}
	if t, ok := f.ref.(name.Tag); ok {
		return t.TagStr()
	}
	return ""
}

// refusal is an artifact refused for what its digest names (a manifest
// that is not a fleet artifact's, a layer that is too large or unsafe),
// which no retry changes: the Client remembers it.
type refusal struct{ error }

// download reads the manifest of digest, checks it is a fleet artifact
// this node may apply (see check), and only then unpacks its layer into
// the store.
func (f *fetcher) download(ctx context.Context, digest string) (*kept, error) {
	dref := f.ref.Context().Digest(digest)
	desc, err := f.opts.Client.manifest(ctx, dref)
	if err != nil {
		return nil, fmt.Errorf("read manifest of %s: %w", f.shown, transport.ExplainHead(ctx, dref, err, f.opts.Client.opts))
	}
	k, l, err := f.parse(digest, desc.MediaType, desc.Manifest)
	if err != nil {
		return nil, refusal{err} // the manifest was checked against digest
	}
	if err := f.check(ctx, k); err != nil {
		return nil, err
	}
	if err := f.unpack(ctx, k, l); err != nil {
		return nil, err
	}
	k.dir = f.st.folder(digest)
	f.log.InfoContext(ctx, "fleet artifact fetched", logKeyURL, f.shown, logKeyDigest, digest, logKeyRevision, source.Revision{Ref: k.Ref, Commit: k.Commit}.String())
	return k, nil
}

// parse checks that the manifest of digest is a fleet artifact's and
// reads what the node keeps of it, and its layer.
func (f *fetcher) parse(digest string, mediaType types.MediaType, raw []byte) (*kept, v1.Descriptor, error) {
	var none v1.Descriptor
	if mediaType != types.OCIManifestSchema1 && mediaType != types.DockerManifestSchema2 {
		return nil, none, fmt.Errorf("%w: %s (%s) is a %s; %s", ErrNotFleet, f.shown, digest, printable.ShortList([]string{string(mediaType)}, 1), expected)
	}
	if len(raw) > MaxManifestBytes {
		return nil, none, fmt.Errorf("%w: %s (%s): its manifest is %d bytes; a fleet artifact's manifest may be at most %d (64 KiB): push it with tend publish or flux push artifact, without large annotations",
			ErrNotFleet, f.shown, digest, len(raw), MaxManifestBytes)
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, none, fmt.Errorf("%w: manifest of %s (%s): %w", ErrNotFleet, f.shown, digest, err)
	}
	if err := checkManifest(m); err != nil {
		return nil, none, fmt.Errorf("%w: %s (%s) has %s; %s", ErrNotFleet, f.shown, digest, err.Error(), expected)
	}
	rev, err := parseRevision(m.Annotations[AnnotationRevision])
	if err != nil {
		return nil, none, fmt.Errorf("%s (%s): %w", f.shown, digest, err)
	}
	created, err := time.Parse(time.RFC3339, m.Annotations[AnnotationCreated])
	if err != nil {
		return nil, none, fmt.Errorf("%w: %s (%s): annotation %s %s is not an RFC 3339 time; the rewind check needs it", ErrNotFleet, f.shown, digest, AnnotationCreated, source.Quote(m.Annotations[AnnotationCreated]))
	}
	ancestors, err := parseAncestors(m.Annotations[AnnotationAncestors])
	if err != nil {
		return nil, none, fmt.Errorf("%w: %s (%s): %w; push it with tend publish", ErrNotFleet, f.shown, digest, err)
	}
	l := m.Layers[0]
	if l.Size > MaxLayerBytes || l.Size < 0 {
		return nil, none, fmt.Errorf("%w: %s (%s): its layer is %s; a fleet artifact may be at most %s", ErrNotFleet, f.shown, digest, printable.HumanBytes(l.Size), printable.HumanBytes(MaxLayerBytes))
	}
	k := &kept{Digest: digest, URL: f.shown, Ref: rev.Ref, Commit: rev.Commit, Created: created, Source: m.Annotations[AnnotationSource],
		Layer: l.Digest.String(), Ancestors: ancestors}
	return k, l, nil
}

// expected says what a fleet artifact is, for errors.
var expected = fmt.Sprintf("a fleet artifact has config %s and one layer %s (tend publish and flux push artifact make them)", ConfigMediaType, ContentMediaType)

// checkManifest says what is found when m is not a fleet artifact's.
func checkManifest(m *v1.Manifest) error {
	var layers []string
	for _, l := range m.Layers {
		layers = append(layers, string(l.MediaType))
	}
	if string(m.Config.MediaType) == ConfigMediaType && len(layers) == 1 && layers[0] == ContentMediaType {
		return nil
	}
	noun := "layers"
	if len(layers) == 1 {
		noun = "layer"
	}
	return fmt.Errorf("config %s and %d %s [%s]", printable.ShortList([]string{orNone(string(m.Config.MediaType))}, 1), len(layers), noun, printable.ShortList(layers, 10))
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// unpack downloads layer l into a temp folder of the store, checking its
// digest and size as it unpacks (confined as extract.Extract is: nothing lands
// outside the folder, no link points out of it, at most
// MaxUnpackedBytes), and renames the folder into place once whole.
func (f *fetcher) unpack(ctx context.Context, k *kept, l v1.Descriptor) (err error) {
	tmp, err := os.MkdirTemp(f.st.dir, statedir.ArtifactTempPrefix)
	if err != nil {
		return fmt.Errorf("unpack %s: %w", f.shown, err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := os.Mkdir(statedir.Artifact(tmp).Tree(), 0o755); err != nil {
		return err
	}
	path, err := f.layerPath(ctx, k, l)
	if err != nil {
		return err
	}
	rc, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read layer %s of %s: %w", l.Digest, f.shown, err)
	}
	defer func() {
		rc.Close()
		if err == nil || errors.As(err, new(refusal)) {
			_ = os.Remove(path) // unpacked and kept, or refused for good
		}
	}()
	h := sha256.New()
	body := io.TeeReader(io.LimitReader(rc, l.Size+1), h)
	if err := extract.Extract(ctx, body, extract.Gzip, statedir.Artifact(tmp).Tree(), &extract.Budget{Limit: MaxUnpackedBytes}); err != nil {
		err = fmt.Errorf("unpack layer %s of %s: %w", l.Digest, f.shown, err)
		if errors.Is(err, extract.ErrUnsafeArchive) || errors.Is(err, extract.ErrTooLarge) {
			// What the layer holds, if the rest of it (at most its
			// size) shows it is the layer the manifest names.
			if _, cerr := io.Copy(io.Discard, body); cerr == nil && "sha256:"+hex.EncodeToString(h.Sum(nil)) == l.Digest.String() {
				return refusal{err}
			}
		}
		f.opts.Client.reset()
		return err
	}
	_, err = io.Copy(io.Discard, body) // what follows the tar: the gzip trailer, padding
	if err != nil {
		f.opts.Client.reset()
		return fmt.Errorf("download layer %s of %s: %w", l.Digest, f.shown, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != l.Digest.String() {
		return fmt.Errorf("%w: layer %s of %s: the registry sent content of digest %s", ErrNotFleet, l.Digest, f.shown, got)
	}
	if err := statedir.WriteJSON(tmp, statedir.ArtifactFile, k, 0o644); err != nil {
		return err
	}
	failpoint.Hit("ocisource:unpacked")
	final := f.st.folder(k.Digest)
	_ = os.RemoveAll(final) // a folder left without its metadata
	if err := atomicfile.Rename(tmp, final); err != nil {
		return fmt.Errorf("keep unpacked artifact %s: %w", k.Digest, err)
	}
	failpoint.Hit("ocisource:kept")
	return nil
}

// hold falls back to the artifact of the last applied commit when the
// target cannot be used, as gitsource does with its clone; nil when it
// is not kept.
func (f *fetcher) hold(cause error) *source.Snapshot {
	if f.src.LastApplied == "" {
		return nil
	}
	k, ok := f.st.byCommit(f.src.LastApplied)
	if !ok {
		return nil
	}
	files, err := k.files(f.src.Paths, f.shown)
	if err != nil {
		return nil
	}
	last := source.ShortCommit(k.Commit)
	stale := fmt.Errorf("holding the last applied commit %s: %w", last, cause)
	switch {
	case errors.Is(cause, source.ErrQuarantined):
		stale = fmt.Errorf("%w; holding the last applied commit %s", cause, last)
	case Unreachable(cause):
		stale = fmt.Errorf("%s is unreachable; holding the last applied commit %s from the artifact kept in stateDir: %w", f.shown, last, cause)
	}
	return &source.Snapshot{URL: f.shown, Revision: source.Revision{Ref: f.refName(k), Commit: k.Commit}, Files: files, Stale: stale}
}
