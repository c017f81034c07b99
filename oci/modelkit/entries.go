package modelkit

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/oci/extract"
)

// layout reads a manifest's layers as entries of a version folder: by
// media type for KitOps and ModelPack, by title for ORAS, and plain tar
// layers into the version folder itself.
func layout(d v1.Hash, m *v1.Manifest) (string, []Entry, error) {
	// A ModelKit may have no layers: its Kitfile is its content (kit
	// unpack writes it), or it names a base ModelKit.
	if len(m.Layers) == 0 && m.Config.MediaType != mediaTypeKitOpsConfig {
		return "", nil, fmt.Errorf("%w: model artifact %s has no layers", ErrUnknownLayout, d)
	}
	if len(m.Layers) > MaxLayers {
		return "", nil, fmt.Errorf("%w: model artifact %s has %d layers; tend reads at most %d: pack the files into tar layers",
			ErrUnknownLayout, d, len(m.Layers), MaxLayers)
	}
	format := ""
	switch string(m.Config.MediaType) {
	case mediaTypeKitOpsConfig:
		format = FormatKitOps
	case mediaTypeModelPackConfig, mediaTypeModelPackLegacyConfig:
		format = FormatModelPack
	}
	var entries []Entry
	var found, unknown []string
	seen := map[string]bool{}
	for _, l := range m.Layers {
		mt := string(l.MediaType)
		if !seen[mt] {
			seen[mt] = true
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
			"tend reads ORAS artifacts (layers with %s), tar layers (%s, +gzip, +zstd), KitOps ModelKits (%s*) and CNCF ModelPack (%s*, or the legacy %s*)",
			ErrUnknownLayout, d, printable.ShortList(found, listedItems), printable.ShortList(unknown, listedItems), printable.ShortList([]string{orNone(string(m.Config.MediaType))}, 1),
			annotationTitle, types.OCIUncompressedLayer, prefixKitOps, prefixModelPack, prefixModelPackLegacy)
	}
	// By path; an image's layers keep their manifest order, which is the
	// order they apply in.
	slices.SortStableFunc(entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	// The same tar layer twice (not an image's) unpacks to the same
	// files: once is enough.
	entries = slices.CompactFunc(entries, func(a, b Entry) bool { return a == b && a.Unpack && !a.Overlay })
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
	case strings.HasPrefix(mt, prefixModelPackLegacy):
		kind, rest = FormatModelPack, strings.TrimPrefix(mt, prefixModelPackLegacy)
	case title != "":
		e.Path = title
		if l.Annotations[annotationORASUnpack] == "true" {
			// ORAS tars and gzips a folder whatever media type it is given.
			e.Unpack, e.Compression = true, extract.Gzip
		}
		return e, FormatORAS, nil
	default:
		c, ok := plainTar[l.MediaType]
		if !ok {
			return e, "", errUnknownLayer
		}
		e.Unpack, e.Compression, e.Overlay = true, c, true
		return e, FormatTar, nil
	}
	// KitOps and ModelPack: <what>.v1.tar[+gzip|+zstd] or <what>.v1.raw,
	// what being model, weight, dataset, code, docs…
	_, format, _ := strings.Cut(rest, ".v1.")
	switch format {
	case "tar", "tar+gzip", "tar+zstd":
		e.Unpack, e.Compression = true, tarCompression[format]
		if kind == FormatModelPack {
			e.Holds = heldPath(cmp.Or(l.Annotations[annotationFilepath], l.Annotations[annotationFilepathLegacy]))
		}
	case "raw":
		e.Path = cmp.Or(l.Annotations[annotationFilepath], l.Annotations[annotationFilepathLegacy], title)
		if e.Path == "" {
			return e, kind, fmt.Errorf("a raw layer needs its file name in annotation %s", annotationFilepath)
		}
		if e.Mode, err = fileMode(l.Annotations); err != nil {
			return e, kind, err
		}
	default:
		return e, kind, errUnknownLayer
	}
	return e, kind, nil
}

// tarCompression maps the suffix of a KitOps or ModelPack tar layer's
// media type to its compression.
var tarCompression = map[string]string{"tar": extract.Uncompressed, "tar+gzip": extract.Gzip, "tar+zstd": extract.Zstd}

// heldPath is the path a tar layer's artifact says it holds (see
// Entry.Holds), cleaned; "" for none, the whole folder, or a path out of
// it (such a layer may hold anything: it is kept).
func heldPath(p string) string {
	p = path.Clean(strings.TrimPrefix(p, "./"))
	if p == "." || path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
		return ""
	}
	return p
}

// fileMetadata is the part of a ModelPack raw layer's file metadata
// annotation tend reads (model-spec's FileMetadata, specs-go/v1/annotations.go:
// name, mode, uid, gid, size, mtime, typeflag). modctl writes the
// permission bits as a number ("mode": 493 for 0755) and restores them
// on extract; tend owns what it writes, so uid, gid and mtime are not
// applied.
type fileMetadata struct {
	Mode uint32 `json:"mode"`
}

// fileMode returns the mode a raw layer's file gets from its metadata
// annotation, with tend's write-bit policy: read-only, execute bits kept,
// and a file its group or others could not read stays so (0600 is 0400,
// 0755 is 0555, 0644 is 0444); its owner always reads it. 0 means the
// blob's 0444: no annotation, no mode in it, or a mode that comes to
// 0444.
func fileMode(annotations map[string]string) (fs.FileMode, error) {
	key := annotationFileMetadata
	raw, ok := annotations[key]
	if !ok {
		key = annotationFileMetadataLegacy
		raw, ok = annotations[key]
	}
	if !ok {
		return 0, nil
	}
	var md fileMetadata
	if err := json.Unmarshal([]byte(raw), &md); err != nil {
		return 0, fmt.Errorf("annotation %s: %w", key, err)
	}
	if md.Mode == 0 {
		return 0, nil // modctl leaves such a file as it made it
	}
	// Its owner reads it, whatever else: tend verifies what it keeps.
	mode := fs.FileMode(md.Mode).Perm()&^0o222 | 0o400
	if mode == 0o444 {
		return 0, nil
	}
	return mode, nil
}

// plainTar maps the media types of image layers to their compression.
var plainTar = map[types.MediaType]string{
	types.OCIUncompressedLayer:    extract.Uncompressed,
	types.OCILayer:                extract.Gzip,
	types.OCILayerZStd:            extract.Zstd,
	types.DockerUncompressedLayer: extract.Uncompressed,
	types.DockerLayer:             extract.Gzip,
}

// MaxLayers bounds the layers of a model artifact tend reads: a model is
// a few files, and a manifest of half a million layers must cost nothing.
const MaxLayers = 10_000

// CheckEntries refuses an entry path that is absolute, climbs out with
// "..", is not clean, or collides with another entry's path (the same
// path, or a file where another entry needs a folder). It takes time
// linear in the entries and the depth of their paths.
func CheckEntries(a *Artifact) error {
	bad := func(e Entry, why string) error {
		return fmt.Errorf("%w: model %s: layer %s: path %q %s", extract.ErrUnsafeArchive, a.Digest, e.Digest, e.Path, why)
	}
	byPath := make(map[string]Entry, len(a.Entries))
	for _, e := range a.Entries {
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
		if o, dup := byPath[p]; dup {
			return bad(e, fmt.Sprintf("collides with layer %s", o.Digest))
		}
		byPath[p] = e
	}
	for _, e := range a.Entries {
		for dir := path.Dir(e.Path); e.Path != "" && dir != "."; dir = path.Dir(dir) {
			if f, ok := byPath[dir]; ok && !f.Unpack {
				return bad(f, fmt.Sprintf("is a file, and layer %s needs it as a folder for %q", e.Digest, e.Path))
			}
		}
	}
	return nil
}
