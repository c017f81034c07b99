package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ErrNotStored means a manifest or blob a model version needs is not in
// the store yet; fetching it again will bring it.
var ErrNotStored = errors.New("not in the blob store")

// ErrNoPlatform means an index has no manifest for this node's platform.
// Retrying will not help until someone pushes one.
var ErrNoPlatform = errors.New("no manifest for this platform")

// ErrUnknownLayout means an artifact's manifest is not a layout tend
// reads. Retrying will not help until someone pushes another artifact.
var ErrUnknownLayout = errors.New("unknown model layout")

// Annotations and media types of the layouts tend reads.
const (
	annotationTitle      = "org.opencontainers.image.title" // ORAS: the file's name
	annotationORASUnpack = "io.deis.oras.content.unpack"    // ORAS: "true" for a tar+gzip folder
	annotationFilepath   = "org.cncf.model.filepath"        // ModelPack and KitOps raw layers

	prefixKitOps    = "application/vnd.kitops.modelkit."
	prefixModelPack = "application/vnd.cncf.model."

	mediaTypeKitOpsConfig    = prefixKitOps + "config.v1+json"
	mediaTypeModelPackConfig = prefixModelPack + "config.v1+json"
)

// Formats of an Artifact, as messages print them.
const (
	FormatORAS      = "oras"
	FormatTar       = "tar"
	FormatKitOps    = "kitops"
	FormatModelPack = "modelpack"
)

// Entry is one piece of a model version, made from one blob.
type Entry struct {
	Digest    v1.Hash
	Size      int64
	MediaType string
	// Path is a slash path relative to the version folder: the file's name,
	// or the folder a tar layer is unpacked into ("" is the version folder
	// itself). A tar layer with a Path holds names that start with Path, as
	// ORAS tars a folder; they land at the same place in the version folder.
	Path        string
	Unpack      bool   // a tar layer, extracted into Path
	Compression string // Uncompressed, Gzip or Zstd, when Unpack
}

// Artifact is a model version as read from its manifest.
type Artifact struct {
	Digest v1.Hash // the digest the ref resolved to (an index or a manifest)
	Format string  // FormatORAS, FormatTar, FormatKitOps or FormatModelPack
	// Manifests are the index (if any), the chosen manifest and the config
	// blob: blobs kept with the version besides the entries.
	Manifests []v1.Hash
	Entries   []Entry // sorted by Path then Digest

	descs map[v1.Hash]v1.Descriptor // sizes and media types of Manifests
}

// Blobs returns every blob the version needs (manifests, config, entries),
// each once. The sizes of manifests are known in artifacts that
// LoadArtifact or FetchArtifact made.
func (a *Artifact) Blobs() []v1.Descriptor {
	seen := map[v1.Hash]bool{}
	var out []v1.Descriptor
	for _, h := range a.Manifests {
		if !seen[h] {
			seen[h] = true
			d := a.descs[h]
			out = append(out, v1.Descriptor{Digest: h, Size: d.Size, MediaType: d.MediaType})
		}
	}
	for _, e := range a.Entries {
		if !seen[e.Digest] {
			seen[e.Digest] = true
			out = append(out, v1.Descriptor{Digest: e.Digest, Size: e.Size, MediaType: types.MediaType(e.MediaType)})
		}
	}
	return out
}

// Size returns what downloading every layer costs: the sum of the entries'
// sizes, each blob once.
func (a *Artifact) Size() int64 {
	seen := map[v1.Hash]bool{}
	var n int64
	for _, e := range a.Entries {
		if !seen[e.Digest] {
			seen[e.Digest] = true
			n += e.Size
		}
	}
	return n
}

// Put stores data under digest d after checking that it hashes to d. The
// blob is written to a temporary file, synced and renamed into place, so
// it is whole or absent. Manifests come this way; layers come with Fetch.
func (s *Store) Put(d v1.Hash, data []byte) error {
	if d.Algorithm != "sha256" {
		return fmt.Errorf("blob %s: only sha256 digests are supported", d)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != d.Hex {
		return fmt.Errorf("store %s: %w: got sha256:%s", d, ErrDigestMismatch, got)
	}
	if s.Has(d) {
		return nil
	}
	f, err := os.CreateTemp(filepath.Join(s.dir, "partial"), "put-"+d.Hex+"-*")
	if err != nil {
		return fmt.Errorf("store %s: %w", d, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o444)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.Path(d))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("store %s: %w", d, err)
	}
	return syncDir(filepath.Dir(s.Path(d)))
}

// read returns the stored blob d, or an error wrapping ErrNotStored.
func (s *Store) read(d v1.Hash, what string) ([]byte, error) {
	b, err := os.ReadFile(s.Path(d))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s %s: %w", what, d, ErrNotStored)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, d, err)
	}
	return b, nil
}

// manifestHead is what tells an index from a manifest.
type manifestHead struct {
	SchemaVersion int64            `json:"schemaVersion"`
	MediaType     types.MediaType  `json:"mediaType"`
	Manifests     *json.RawMessage `json:"manifests"`
}

func isIndex(b []byte) (bool, error) {
	var h manifestHead
	if err := json.Unmarshal(b, &h); err != nil {
		return false, err
	}
	switch {
	case h.SchemaVersion == 1 || h.MediaType == types.DockerManifestSchema1 || h.MediaType == types.DockerManifestSchema1Signed:
		return false, errors.New("docker schema 1 manifests are not supported; push the artifact again with a current client")
	case h.MediaType == types.OCIImageIndex || h.MediaType == types.DockerManifestList:
		return true, nil
	case h.MediaType == "":
		return h.Manifests != nil, nil
	}
	return false, nil
}

// LoadArtifact reads the artifact with manifest (or index) digest d from
// the store alone, without the network. For an index it picks the
// manifest for platform. It returns an error wrapping ErrNotStored when
// the manifest, or the index's chosen manifest, is not in the store.
func (s *Store) LoadArtifact(d v1.Hash, platform v1.Platform) (*Artifact, error) {
	a := &Artifact{Digest: d, descs: map[v1.Hash]v1.Descriptor{}}
	m, err := s.readIndex(a, platform)
	if err != nil {
		return nil, err
	}
	return s.readManifest(a, m)
}

// readIndex reads a.Digest and, when it is an index, records it in a and
// returns the digest of the manifest chosen for platform; otherwise it
// returns a.Digest.
func (s *Store) readIndex(a *Artifact, platform v1.Platform) (v1.Hash, error) {
	b, err := s.read(a.Digest, "model manifest")
	if err != nil {
		return v1.Hash{}, err
	}
	index, err := isIndex(b)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("model manifest %s: %w", a.Digest, err)
	}
	if !index {
		return a.Digest, nil
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(b))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("model index %s: %w", a.Digest, err)
	}
	child, err := pickManifest(a.Digest, im, platform)
	if err != nil {
		return v1.Hash{}, err
	}
	mt := im.MediaType
	if mt == "" {
		mt = types.OCIImageIndex
	}
	a.Manifests = append(a.Manifests, a.Digest)
	a.descs[a.Digest] = v1.Descriptor{Digest: a.Digest, Size: int64(len(b)), MediaType: mt}
	return child.Digest, nil
}

// readManifest reads manifest m of a from the store and lays out its
// entries.
func (s *Store) readManifest(a *Artifact, m v1.Hash) (*Artifact, error) {
	b, err := s.read(m, "model manifest")
	if err != nil {
		return nil, err
	}
	if index, err := isIndex(b); err != nil || index {
		if err == nil {
			err = errors.New("an index inside an index is not supported")
		}
		return nil, fmt.Errorf("model manifest %s: %w", m, err)
	}
	man, err := v1.ParseManifest(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("model manifest %s: %w", m, err)
	}
	mt := man.MediaType
	if mt == "" {
		mt = types.OCIManifestSchema1
	}
	a.Manifests = append(a.Manifests, m)
	a.descs[m] = v1.Descriptor{Digest: m, Size: int64(len(b)), MediaType: mt}
	if man.Config.Digest.Hex != "" {
		a.Manifests = append(a.Manifests, man.Config.Digest)
		a.descs[man.Config.Digest] = man.Config
	}
	if a.Format, a.Entries, err = layout(a.Digest, man); err != nil {
		return nil, err
	}
	if err := checkEntries(a); err != nil {
		return nil, err
	}
	return a, nil
}

// pickManifest chooses the manifest of index d for platform: the best
// match of os and architecture (a variant must be equal when both have
// one, and an equal variant beats none); failing that, the only manifest,
// or the only one without a platform.
func pickManifest(d v1.Hash, im *v1.IndexManifest, platform v1.Platform) (v1.Descriptor, error) {
	best, bestRank := -1, 0
	var bare []int
	var offered []string
	for i, m := range im.Manifests {
		p := m.Platform
		if p == nil || p.OS == "" && p.Architecture == "" {
			bare = append(bare, i)
			continue
		}
		if p.OS != "unknown" { // not buildx's attestations
			offered = append(offered, p.String())
		}
		if p.OS != platform.OS || p.Architecture != platform.Architecture {
			continue
		}
		rank := 1
		switch {
		case platform.Variant == "" || p.Variant == "":
		case p.Variant == platform.Variant:
			rank = 2
		default:
			continue
		}
		if rank > bestRank {
			best, bestRank = i, rank
		}
	}
	switch {
	case best >= 0:
		return im.Manifests[best], nil
	case len(im.Manifests) == 1:
		return im.Manifests[0], nil
	case len(bare) == 1:
		return im.Manifests[bare[0]], nil
	case len(im.Manifests) == 0:
		return v1.Descriptor{}, fmt.Errorf("%w: model index %s lists no manifests", ErrUnknownLayout, d)
	}
	slices.Sort(offered)
	return v1.Descriptor{}, fmt.Errorf("model index %s: %w %s; it offers %s",
		d, ErrNoPlatform, platform, strings.Join(slices.Compact(offered), ", "))
}

// layout reads a manifest's layers as entries of a version folder: by
// media type for KitOps and ModelPack, by title for ORAS, and plain tar
// layers into the version folder itself.
func layout(d v1.Hash, m *v1.Manifest) (string, []Entry, error) {
	if len(m.Layers) == 0 {
		return "", nil, fmt.Errorf("%w: model artifact %s has no layers", ErrUnknownLayout, d)
	}
	format := ""
	switch string(m.Config.MediaType) {
	case mediaTypeKitOpsConfig:
		format = FormatKitOps
	case mediaTypeModelPackConfig:
		format = FormatModelPack
	}
	var entries []Entry
	var found, unknown []string
	for _, l := range m.Layers {
		mt := string(l.MediaType)
		if !slices.Contains(found, mt) {
			found = append(found, mt)
		}
		e, kind, err := layerEntry(l)
		if errors.Is(err, errUnknownLayer) {
			if !slices.Contains(unknown, mt) {
				unknown = append(unknown, mt)
			}
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("%w in %s: layer %s (%s): %w", ErrUnknownLayout, d, l.Digest, mt, err)
		}
		if format == "" || format == FormatTar && kind == FormatORAS {
			format = kind
		}
		entries = append(entries, e)
	}
	if len(unknown) > 0 {
		return "", nil, fmt.Errorf("%w in %s: layer media types [%s] (not understood: %s), config %s; "+
			"tend reads ORAS artifacts (layers with %s), tar layers (%s, +gzip, +zstd), KitOps ModelKits (%s*) and CNCF ModelPack (%s*)",
			ErrUnknownLayout, d, strings.Join(found, ", "), strings.Join(unknown, ", "), orNone(string(m.Config.MediaType)),
			annotationTitle, types.OCIUncompressedLayer, prefixKitOps, prefixModelPack)
	}
	slices.SortFunc(entries, func(a, b Entry) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Digest.String(), b.Digest.String())
	})
	// The same tar layer twice unpacks to the same files: once is enough.
	entries = slices.CompactFunc(entries, func(a, b Entry) bool { return a == b && a.Unpack })
	return format, entries, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// errUnknownLayer is a layer whose media type no layout explains.
var errUnknownLayer = errors.New("unknown layer media type")

// layerEntry reads one layer as an entry; kind is the format the layer
// belongs to.
func layerEntry(l v1.Descriptor) (e Entry, kind string, err error) {
	mt := string(l.MediaType)
	e = Entry{Digest: l.Digest, Size: l.Size, MediaType: mt}
	title := l.Annotations[annotationTitle]
	var rest string
	switch {
	case strings.HasPrefix(mt, prefixKitOps):
		kind, rest = FormatKitOps, strings.TrimPrefix(mt, prefixKitOps)
	case strings.HasPrefix(mt, prefixModelPack):
		kind, rest = FormatModelPack, strings.TrimPrefix(mt, prefixModelPack)
	case title != "":
		e.Path = title
		if l.Annotations[annotationORASUnpack] == "true" {
			// ORAS tars and gzips a folder whatever media type it is given.
			e.Unpack, e.Compression = true, Gzip
		}
		return e, FormatORAS, nil
	default:
		c, ok := plainTar[l.MediaType]
		if !ok {
			return e, "", errUnknownLayer
		}
		e.Unpack, e.Compression = true, c
		return e, FormatTar, nil
	}
	// KitOps and ModelPack: <what>.v1.tar[+gzip|+zstd] or <what>.v1.raw,
	// what being model, weight, dataset, code, docs…
	_, format, _ := strings.Cut(rest, ".v1.")
	switch format {
	case "tar":
		e.Unpack, e.Compression = true, Uncompressed
	case "tar+gzip":
		e.Unpack, e.Compression = true, Gzip
	case "tar+zstd":
		e.Unpack, e.Compression = true, Zstd
	case "raw":
		e.Path = l.Annotations[annotationFilepath]
		if e.Path == "" {
			e.Path = title
		}
		if e.Path == "" {
			return e, kind, fmt.Errorf("a raw layer needs its file name in annotation %s", annotationFilepath)
		}
	default:
		return e, kind, errUnknownLayer
	}
	return e, kind, nil
}

// plainTar maps the media types of image layers to their compression.
var plainTar = map[types.MediaType]string{
	types.OCIUncompressedLayer:    Uncompressed,
	types.OCILayer:                Gzip,
	types.OCILayerZStd:            Zstd,
	types.DockerUncompressedLayer: Uncompressed,
	types.DockerLayer:             Gzip,
}

// checkEntries refuses an entry path that is absolute, climbs out with
// "..", is not clean, or collides with another entry's path.
func checkEntries(a *Artifact) error {
	bad := func(e Entry, why string) error {
		return fmt.Errorf("%w: model %s: layer %s: path %q %s", ErrUnsafeArchive, a.Digest, e.Digest, e.Path, why)
	}
	for i, e := range a.Entries {
		p := e.Path
		switch {
		case p == "" && !e.Unpack:
			return bad(e, "is empty: a file needs a name")
		case p == "":
			continue
		case path.IsAbs(p) || strings.HasPrefix(p, `\`):
			return bad(e, "is absolute")
		case p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/.."):
			return bad(e, `climbs out of the version folder with ".."`)
		case path.Clean(p) != p || p == "." || strings.ContainsRune(p, 0):
			return bad(e, "is not a clean path")
		}
		for j, o := range a.Entries {
			switch {
			case i == j || o.Path == "":
			case o.Path == p:
				return bad(e, fmt.Sprintf("collides with layer %s", o.Digest))
			case !e.Unpack && strings.HasPrefix(o.Path, p+"/"):
				return bad(e, fmt.Sprintf("is a file, and layer %s needs it as a folder for %q", o.Digest, o.Path))
			}
		}
	}
	return nil
}

// FetchArtifact brings the manifest of repo@d into the store when it is
// not already there (for an index, the index and the manifest for
// platform), then the config blob, each checked against its digest, and
// returns the artifact and the bytes downloaded. Layers are not
// downloaded: FetchAll the artifact's Blobs for that.
func (s *Store) FetchArtifact(ctx context.Context, repo name.Repository, d v1.Hash, platform v1.Platform, opts Options) (*Artifact, int64, error) {
	total, err := s.fetchManifest(ctx, repo, d, opts)
	if err != nil {
		return nil, total, err
	}
	m, err := s.readIndex(&Artifact{Digest: d, descs: map[v1.Hash]v1.Descriptor{}}, platform)
	if err != nil {
		return nil, total, err
	}
	n, err := s.fetchManifest(ctx, repo, m, opts)
	total += n
	if err != nil {
		return nil, total, err
	}
	a, err := s.LoadArtifact(d, platform)
	if err != nil {
		return nil, total, err
	}
	for _, h := range a.Manifests {
		n, err := s.Fetch(ctx, repo, h, a.descs[h].Size, opts)
		total += n
		if err != nil {
			return nil, total, err
		}
	}
	return a, total, nil
}

// fetchManifest stores manifest d of repo unless it is there already.
func (s *Store) fetchManifest(ctx context.Context, repo name.Repository, d v1.Hash, opts Options) (int64, error) {
	if s.Has(d) {
		return 0, nil
	}
	ref := repo.Digest(d.String())
	desc, err := remote.Get(ref, opts.remoteOptions(ctx)...)
	if err != nil {
		return 0, classify(ref.String(), err)
	}
	if err := s.Put(d, desc.Manifest); err != nil {
		return int64(len(desc.Manifest)), fmt.Errorf("manifest %s: %w", ref, err)
	}
	return int64(len(desc.Manifest)), nil
}

// NodePlatform returns this machine's platform, as index manifests name
// them: the OS, the architecture and, for arm, the variant when known.
func NodePlatform() v1.Platform {
	p := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	switch runtime.GOARCH {
	case "arm64":
		p.Variant = "v8"
	case "arm":
		cpuinfo, _ := os.ReadFile("/proc/cpuinfo")
		goarm := ""
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "GOARM" {
					goarm = s.Value
				}
			}
		}
		p.Variant = armVariant(string(cpuinfo), goarm)
	}
	return p
}

// armVariant reads the 32-bit arm variant from /proc/cpuinfo ("CPU
// architecture: 7"), or else from the GOARM the binary was built for.
func armVariant(cpuinfo, goarm string) string {
	for line := range strings.Lines(cpuinfo) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "CPU architecture") {
			continue
		}
		switch v = strings.TrimSpace(v); {
		case v == "8" || strings.EqualFold(v, "AArch64"):
			return "v7" // a 32-bit userland on a 64-bit core runs v7 code
		case strings.HasPrefix(v, "7"), strings.HasPrefix(v, "6"), strings.HasPrefix(v, "5"):
			return "v" + v[:1]
		}
	}
	if goarm != "" {
		return "v" + goarm[:1]
	}
	return ""
}
