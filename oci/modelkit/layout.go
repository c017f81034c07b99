package modelkit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tend-dev/tend/oci/transport"
)

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
	// ModelPack raw layers: the file's name, mode, uid, gid, size, mtime
	// and typeflag, as JSON (model-spec's FileMetadata).
	annotationFileMetadata = "org.cncf.model.file.metadata+json"

	prefixKitOps    = "application/vnd.kitops.modelkit."
	prefixModelPack = "application/vnd.cncf.model."

	mediaTypeKitOpsConfig    = prefixKitOps + "config.v1+json"
	mediaTypeModelPackConfig = prefixModelPack + "config.v1+json"

	// Legacy ModelPack (CNAI): model-spec up to v0.0.6
	// (github.com/dragonflyoss/model-spec, specs-go/v1/mediatype.go and
	// annotations.go), which modctl v0.2.x pushes and current modctl
	// still extracts: "application/vnd.cnai.model.config.v1+json",
	// "application/vnd.cnai.model.weight.v1.raw",
	// "application/vnd.cnai.model.weight.v1.tar+gzip" and so on, with
	// annotations "org.cnai.model.filepath" and
	// "org.cnai.model.file.metadata+json". model-spec v0.0.7 renamed them
	// to vnd.cncf and org.cncf, changing nothing else.
	prefixModelPackLegacy          = "application/vnd.cnai.model."
	mediaTypeModelPackLegacyConfig = prefixModelPackLegacy + "config.v1+json"
	annotationFilepathLegacy       = "org.cnai.model.filepath"
	annotationFileMetadataLegacy   = "org.cnai.model.file.metadata+json"
)

// Formats of an Artifact, as messages print them.
const (
	FormatORAS      = "oras"
	FormatTar       = "tar"
	FormatKitOps    = "kitops"
	FormatModelPack = "modelpack"
)

// listedItems is how many items of a list (media types, platforms, files)
// an error quotes.
const listedItems = 10

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
	Compression string // extract.Uncompressed, Gzip or Zstd, when Unpack
	// Mode is the mode of a file entry (not Unpack) when its artifact
	// gives one other than the blob's 0444 (a ModelPack file's metadata
	// annotation): the file is a copy of its blob with this mode, not a
	// hard link. 0 is a hard link, 0444.
	Mode fs.FileMode
	// Holds, for a tar layer unpacked into the version folder itself
	// (Path ""), is the slash path its files are under as its artifact
	// declares it: a ModelPack layer's filepath annotation, the path of
	// the Kitfile entry (model, part, code, dataset, docs) a ModelKit
	// layer belongs to, as kit unpack maps them. Include skips a layer
	// that cannot hold a selected path. "" when the artifact does not say,
	// or says the whole folder: the layer may hold any path.
	Holds string
	// Repo is the repository the blob is pulled from when it is not the
	// artifact's own (a base ModelKit's layer), as a reference names it:
	// host/path. "" is the artifact's repository.
	Repo string
	// Overlay marks a layer of an image: the layers apply in manifest
	// order, a later one overwrites what an earlier one wrote, and its
	// whiteouts (.wh.NAME, and .wh..wh..opq for a folder's content)
	// delete what earlier ones wrote, as the OCI image layer spec says.
	Overlay bool
}

// Artifact is a model version as read from its manifest.
type Artifact struct {
	Digest v1.Hash // the digest the ref resolved to (an index or a manifest)
	Format string  // FormatORAS, FormatTar, FormatKitOps or FormatModelPack
	// Manifests are the index (if any), the chosen manifest and the config
	// blob: blobs kept with the version besides the entries.
	Manifests []v1.Hash
	// Config is the config blob (one of Manifests; zero when the manifest
	// has none).
	Config  v1.Hash
	Entries []Entry // sorted by Path; an image's layers (Overlay) in manifest order
	// Bases are the base ModelKits a ModelKit's model comes from (its
	// Kitfile's model.path names one, whose may name another), each
	// pinned to the digest its ref resolved to when the ModelKit was read;
	// their model and model part layers are among Entries, with Repo set,
	// and their manifests and configs among Manifests.
	Bases []Base

	descs map[v1.Hash]v1.Descriptor // sizes and media types of Manifests
	// layers are the chosen manifest's layers in manifest order, which a
	// ModelKit's config maps to its Kitfile's entries.
	layers []v1.Descriptor
	// include is what Include selected the entries by; nil for all.
	include []string
	// baseRef is the base ModelKit a ModelKit's Kitfile names in
	// model.path; "" for none.
	baseRef string
	// repos holds the repository of each manifest of a base (see
	// Entry.Repo).
	repos map[v1.Hash]string
}

// Base is a base ModelKit, pinned.
type Base struct {
	Ref    string  // as the Kitfile's model.path names it
	Digest v1.Hash // of its manifest (or index)
}

// String is the form plans and status print: "ref → sha256:…".
func (b Base) String() string { return b.Ref + " → " + b.Digest.String() }

// BlobRepo returns the repository blob h of a is pulled from when it is
// not a's own (a base ModelKit's), as Entry.Repo names it; "" for a's.
func (a *Artifact) BlobRepo(h v1.Hash) string { return a.repos[h] }

// Included returns the patterns Include selected a's entries by; nil
// when a holds every entry of its version.
func (a *Artifact) Included() []string { return a.include }

// Blobs returns every blob the version needs (manifests, config, entries),
// each once. The sizes of manifests are known in artifacts that Load or
// Inspect made (and the store's LoadArtifact and FetchArtifact).
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

// Descriptor returns the size and media type of h, one of a's Manifests
// (the zero Descriptor for another blob).
func (a *Artifact) Descriptor(h v1.Hash) v1.Descriptor { return a.descs[h] }

// Tars returns a's tar layers by digest.
func (a *Artifact) Tars() map[v1.Hash]Entry {
	tars := map[v1.Hash]Entry{}
	for _, e := range a.Entries {
		if e.Unpack {
			tars[e.Digest] = e
		}
	}
	return tars
}

// FileBlobs returns the digests of a's entries that are files, linked
// from their blob (not tar layers).
func (a *Artifact) FileBlobs() map[v1.Hash]bool {
	raw := map[v1.Hash]bool{}
	for _, e := range a.Entries {
		if !e.Unpack {
			raw[e.Digest] = true
		}
	}
	return raw
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

// Inspect reads the artifact repo@d from its registry as the store's
// FetchArtifact does (for an index, the index and the manifest for
// platform, and a ModelKit's config, and those of its base ModelKits,
// each base ref resolved with a HEAD), each checked against its digest,
// without storing anything: what downloading it costs is known where
// there is no store (CI).
func Inspect(ctx context.Context, repo name.Repository, d v1.Hash, platform v1.Platform, opts transport.Options) (*Artifact, error) {
	a, err := inspect(ctx, repo, d, platform, opts)
	if err != nil || a.baseRef == "" {
		return a, err
	}
	err = a.ResolveBases(func(ref string) (*Artifact, string, error) {
		r, err := name.ParseReference(ref, opts.NameOptions(ref)...)
		if err != nil {
			return nil, "", err
		}
		desc, err := transport.HeadManifest(ctx, r, opts)
		if err != nil {
			return nil, "", transport.ExplainHead(ctx, r, err, opts)
		}
		b, err := inspect(ctx, r.Context(), desc.Digest, platform, opts)
		return b, r.Context().String(), err
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// inspect is Inspect without the bases.
func inspect(ctx context.Context, repo name.Repository, d v1.Hash, platform v1.Platform, opts transport.Options) (*Artifact, error) {
	read := func(h v1.Hash, what string) ([]byte, error) {
		ref := repo.Digest(h.String())
		desc, err := transport.GetManifest(ctx, ref, opts)
		if err != nil {
			return nil, transport.Classify(ref.String(), err, opts)
		}
		if sum := sha256.Sum256(desc.Manifest); hex.EncodeToString(sum[:]) != h.Hex {
			return nil, fmt.Errorf("%s %s: %w", what, ref, transport.ErrDigestMismatch)
		}
		return desc.Manifest, nil
	}
	a, err := Load(read, d, platform)
	if err != nil {
		return nil, err
	}
	if err := a.ReadModelKit(remoteBlob(ctx, repo, opts)); err != nil {
		return nil, err
	}
	return a, nil
}

// A BlobReader returns the bytes of blob d, a manifest or a config; what
// names it in errors. The store reads its own copy, Inspect asks the
// registry.
type BlobReader func(d v1.Hash, what string) ([]byte, error)

// Load reads the artifact with manifest (or index) digest d through
// read, and for an index the manifest it lists for platform: its format
// and its entries, laid out and checked (see CheckEntries). A ModelKit's
// config is not read (see ReadModelKit and SetHolds), nor its bases.
func Load(read BlobReader, d v1.Hash, platform v1.Platform) (*Artifact, error) {
	a := &Artifact{Digest: d, descs: map[v1.Hash]v1.Descriptor{}}
	m, err := readIndex(read, a, platform)
	if err != nil {
		return nil, err
	}
	return readManifest(read, a, m)
}

// ManifestFor returns the digest of the manifest d stands for on
// platform: d itself, or when read gives an index at d, the manifest the
// index lists for platform (see Load).
func ManifestFor(read BlobReader, d v1.Hash, platform v1.Platform) (v1.Hash, error) {
	return readIndex(read, &Artifact{Digest: d, descs: map[v1.Hash]v1.Descriptor{}}, platform)
}

// readIndex reads a.Digest and, when it is an index, records it in a and
// returns the digest of the manifest chosen for platform; otherwise it
// returns a.Digest.
func readIndex(read BlobReader, a *Artifact, platform v1.Platform) (v1.Hash, error) {
	b, err := read(a.Digest, "model manifest")
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

// readManifest reads manifest m of a and lays out its entries.
func readManifest(read BlobReader, a *Artifact, m v1.Hash) (*Artifact, error) {
	b, err := read(m, "model manifest")
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
		a.Config = man.Config.Digest
	}
	a.layers = man.Layers
	if a.Format, a.Entries, err = layout(a.Digest, man); err != nil {
		return nil, err
	}
	if err := CheckEntries(a); err != nil {
		return nil, err
	}
	return a, nil
}
