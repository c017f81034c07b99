package modelkit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"go.yaml.in/yaml/v3"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/oci/transport"
)

// ErrBaseModelKit means the base ModelKit a ModelKit's Kitfile names in
// model.path cannot be read: not found, not a ModelKit, unreachable, or
// the chain of bases loops or is longer than MaxModelRefChain.
var ErrBaseModelKit = errors.New("base ModelKit cannot be read")

// MaxModelRefChain bounds the base ModelKits one ModelKit's model goes
// through, as kit's constants.MaxModelRefChain does.
const MaxModelRefChain = 10

// KitfileName is where a ModelKit's Kitfile is written in its version
// folder, as kit unpack writes it.
const KitfileName = "Kitfile"

// maxKitfile bounds the config blob of a ModelKit tend reads: a Kitfile
// is a few kilobytes.
const maxKitfile = 4 << 20

// kitFile is a ModelKit's config as KitOps reads and writes it
// (github.com/kitops-ml/kitops, pkg/artifact/kitfile.go): the same
// fields in the same order, encoded by the same YAML library, so that it
// marshals to the Kitfile kit unpack writes. The digests and diff ids the
// config gives each layer are not part of a Kitfile (yaml:"-" there) and
// are left out.
type kitFile struct {
	ManifestVersion string       `json:"manifestVersion" yaml:"manifestVersion"`
	Package         kitPackage   `json:"package,omitempty" yaml:"package,omitempty"`
	Model           *kitModel    `json:"model,omitempty" yaml:"model,omitempty"`
	Code            []kitCode    `json:"code,omitempty" yaml:"code,omitempty"`
	DataSets        []kitDataSet `json:"datasets,omitempty" yaml:"datasets,omitempty"`
	Docs            []kitDocs    `json:"docs,omitempty" yaml:"docs,omitempty"`
}

type kitPackage struct {
	Name        string   `json:"name,omitempty" yaml:"name,omitempty"`
	Version     string   `json:"version,omitempty" yaml:"version,omitempty"`
	Description string   `json:"description,omitempty" yaml:"description,omitempty"`
	License     string   `json:"license,omitempty" yaml:"license,omitempty"`
	Authors     []string `json:"authors,omitempty" yaml:"authors,omitempty,flow"`
}

type kitDocs struct {
	Path        string `json:"path" yaml:"path"`
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
}

type kitModel struct {
	Name        string         `json:"name,omitempty" yaml:"name,omitempty"`
	Path        string         `json:"path,omitempty" yaml:"path,omitempty"`
	License     string         `json:"license,omitempty" yaml:"license,omitempty"`
	Framework   string         `json:"framework,omitempty" yaml:"framework,omitempty"`
	Format      string         `json:"format,omitempty" yaml:"format,omitempty"`
	Version     string         `json:"version,omitempty" yaml:"version,omitempty"`
	Description string         `json:"description,omitempty" yaml:"description,omitempty"`
	Parts       []kitModelPart `json:"parts,omitempty" yaml:"parts,omitempty"`
	Parameters  any            `json:"parameters,omitempty" yaml:"parameters,omitempty"`
}

type kitModelPart struct {
	Name    string `json:"name,omitempty" yaml:"name,omitempty"`
	Path    string `json:"path,omitempty" yaml:"path,omitempty"`
	License string `json:"license,omitempty" yaml:"license,omitempty"`
	Type    string `json:"type,omitempty" yaml:"type,omitempty"`
}

type kitCode struct {
	Path        string `json:"path,omitempty" yaml:"path,omitempty"`
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	License     string `json:"license,omitempty" yaml:"license,omitempty"`
}

type kitDataSet struct {
	Name        string `json:"name,omitempty" yaml:"name,omitempty"`
	Path        string `json:"path,omitempty" yaml:"path,omitempty"`
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	License     string `json:"license,omitempty" yaml:"license,omitempty"`
	Parameters  any    `json:"parameters,omitempty" yaml:"parameters,omitempty"`
}

// IsModelKit says whether a's config is a ModelKit's (a Kitfile as JSON).
func (a *Artifact) IsModelKit() bool {
	return a.Config.Hex != "" && a.descs[a.Config].MediaType == mediaTypeKitOpsConfig
}

// Kitfile returns the Kitfile of ModelKit d, whose config blob is config,
// as kit unpack writes it (YAML, two-space indent).
func Kitfile(d v1.Hash, config []byte) ([]byte, error) {
	var kf kitFile
	if err := json.Unmarshal(config, &kf); err != nil {
		return nil, fmt.Errorf("ModelKit %s: config (its Kitfile): %w", d, err)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&kf); err != nil {
		return nil, fmt.Errorf("ModelKit %s: Kitfile: %w", d, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("ModelKit %s: Kitfile: %w", d, err)
	}
	return b.Bytes(), nil
}

// isModelKitReference says whether a Kitfile's model.path names a
// ModelKit rather than a file, as kit does (IsModelKitReference in
// pkg/lib/repo/util): it has ":" or "@" and parses as a reference.
func isModelKitReference(p string) bool {
	if !strings.ContainsAny(p, ":@") {
		return false
	}
	_, err := name.ParseReference(p)
	return err == nil
}

// ReadModelKit reads a ModelKit's config (read gives it): its tar layers
// get the paths they hold (SetHolds), and the base ModelKit its
// model.path names, if any, is noted for ResolveBases. It reads nothing
// of another artifact.
func (a *Artifact) ReadModelKit(read BlobReader) error {
	if !a.IsModelKit() {
		return nil
	}
	if size := a.descs[a.Config].Size; size > maxKitfile {
		return fmt.Errorf("%w: ModelKit %s: a config (Kitfile) of %s; tend reads at most %s", ErrUnknownLayout, a.Digest, printable.HumanBytes(size), printable.HumanBytes(maxKitfile))
	}
	config, err := read(a.Config, "ModelKit config")
	if err != nil {
		return err
	}
	var kf kitFile
	if err := json.Unmarshal(config, &kf); err != nil {
		return fmt.Errorf("ModelKit %s: config (its Kitfile): %w", a.Digest, err)
	}
	if kf.Model != nil && isModelKitReference(kf.Model.Path) {
		a.baseRef = kf.Model.Path
	}
	return a.SetHolds(config)
}

// A BaseSource reads the base ModelKit ref names, pinned to a digest,
// with its config read (ReadModelKit); repo is where its blobs are.
type BaseSource func(ref string) (b *Artifact, repo string, err error)

// ResolveBases joins to ModelKit a the model and model part layers of the
// base ModelKit its Kitfile names, and of that base's base and so on, as
// kit unpack does (unpackParent: only the model of a base, its code,
// datasets and docs and its Kitfile left out; a cycle refused; at most
// MaxModelRefChain bases). Each base is read through source and recorded
// in a.Bases, pinned by digest; its layers are pulled from its own
// repository (Entry.Repo). An artifact whose config ReadModelKit found no
// base in is left as it is.
func (a *Artifact) ResolveBases(source BaseSource) error {
	var visited []string
	var joined []Entry
	for ref := a.baseRef; ref != ""; {
		why := ""
		if i := slices.Index(visited, ref); i >= 0 {
			why = "its bases loop: " + strings.Join(append(visited[i:], ref), " => ")
		} else if len(visited) >= MaxModelRefChain {
			why = fmt.Sprintf("its bases go on past %d (%s => %s); kit unpack stops there too", MaxModelRefChain, strings.Join(visited, " => "), ref)
		}
		if why != "" {
			return fmt.Errorf("%w: model artifact %s is a ModelKit whose model is the ModelKit %s (model.path in its Kitfile), and %s: point model.path at a ModelKit that holds the model's files",
				ErrBaseModelKit, a.Digest, a.baseRef, why)
		}
		visited = append(visited, ref)
		b, repo, err := source(ref)
		if err == nil && !b.IsModelKit() {
			err = fmt.Errorf("%s is not a ModelKit (config %s)", b.Digest, orNone(string(b.descs[b.Config].MediaType)))
		}
		if err != nil {
			return fmt.Errorf("%w: model artifact %s is a ModelKit whose model is the ModelKit %s (model.path in its Kitfile): %w; push it, or point model.path at a ModelKit tend can read",
				ErrBaseModelKit, a.Digest, ref, err)
		}
		if a.repos == nil {
			a.repos = map[v1.Hash]string{}
		}
		for _, h := range b.Manifests {
			if _, ok := a.descs[h]; !ok {
				a.Manifests = append(a.Manifests, h)
				a.descs[h] = b.descs[h]
				a.repos[h] = repo
			}
		}
		for _, e := range b.Entries {
			if m := kitTarType.FindStringSubmatch(e.MediaType); m != nil && (m[1] == "model" || m[1] == "modelpart") {
				e.Repo = repo
				a.repos[e.Digest] = repo
				joined = append(joined, e)
			}
		}
		a.Bases = append(a.Bases, Base{Ref: ref, Digest: b.Digest})
		ref = b.baseRef
	}
	if len(joined) == 0 {
		return nil
	}
	// A base's layers first, as kit unpacks them; then by path.
	a.Entries = append(joined, a.Entries...)
	slices.SortStableFunc(a.Entries, func(x, y Entry) int { return strings.Compare(x.Path, y.Path) })
	return CheckEntries(a)
}

// kitLayerRef is what a ModelKit's config says of the layer of one of
// its Kitfile's entries: the path it was packed from and, in ModelKits
// kit packs today, the layer's digest (LayerInfo in kit's
// pkg/artifact/kitfile.go).
type kitLayerRef struct {
	Path   string `json:"path"`
	Digest string `json:"digest"`
}

// kitLayerRefs are the entries of a ModelKit's config that have layers.
type kitLayerRefs struct {
	Model *struct {
		kitLayerRef
		Parts []kitLayerRef `json:"parts"`
	} `json:"model"`
	Code     []kitLayerRef `json:"code"`
	DataSets []kitLayerRef `json:"datasets"`
	Docs     []kitLayerRef `json:"docs"`
}

// kitTarType reads the base type of a ModelKit tar layer's media type,
// as kit does (constants.ParseMediaType).
var kitTarType = regexp.MustCompile(`^application/vnd\.kitops\.modelkit\.(\w+)\.v1\.tar`)

// SetHolds gives each tar layer of ModelKit a the path its Kitfile entry
// declares (Entry.Holds), read from config, its config blob, mapping layers to entries as kit unpack does:
// by the base type of the layer's media type (model, modelpart, code,
// dataset, docs) and its index among the layers of that type in manifest
// order, every model layer to the model. A layer whose entry gives
// another digest is refused, as kit unpack refuses it. A layer with no
// entry, or that the config maps to two paths, may hold any path.
func (a *Artifact) SetHolds(config []byte) error {
	var refs kitLayerRefs
	if err := json.Unmarshal(config, &refs); err != nil {
		return fmt.Errorf("ModelKit %s: config (its Kitfile): %w", a.Digest, err)
	}
	held := map[v1.Hash]string{}
	twice := map[v1.Hash]bool{}
	next := map[string]int{}
	for _, l := range a.layers {
		m := kitTarType.FindStringSubmatch(string(l.MediaType))
		if m == nil {
			continue
		}
		typ := m[1]
		var list []kitLayerRef
		field := typ
		switch typ {
		case "model":
			if refs.Model != nil {
				list = []kitLayerRef{refs.Model.kitLayerRef}
			}
		case "modelpart":
			if refs.Model != nil {
				list = refs.Model.Parts
			}
			field = "model.parts"
		case "code":
			list = refs.Code
		case "dataset":
			list, field = refs.DataSets, "datasets"
		case "docs":
			list = refs.Docs
		default:
			continue
		}
		i := next[typ]
		if typ != "model" {
			next[typ]++
		}
		if i >= len(list) {
			twice[l.Digest] = true // no entry says: it may hold any path
			continue
		}
		r := list[i]
		if r.Digest != "" && r.Digest != l.Digest.String() {
			return fmt.Errorf("%w: ModelKit %s: layer %s is %s %q, whose digest in the config (Kitfile) is %s; kit unpack refuses it too: push the ModelKit again with kit pack",
				ErrUnknownLayout, a.Digest, l.Digest, field, r.Path, r.Digest)
		}
		p := heldPath(r.Path)
		if isModelKitReference(r.Path) {
			p = ""
		}
		if old, ok := held[l.Digest]; ok && old != p {
			twice[l.Digest] = true
		}
		held[l.Digest] = p
	}
	for i := range a.Entries {
		if e := &a.Entries[i]; e.Unpack && e.Path == "" && !twice[e.Digest] {
			e.Holds = held[e.Digest]
		}
	}
	return nil
}

// remoteBlob returns a small blob of repo (a config), checked against its
// digest, from the registry.
func remoteBlob(ctx context.Context, repo name.Repository, opts transport.Options) BlobReader {
	return func(h v1.Hash, what string) ([]byte, error) {
		ref := repo.Digest(h.String())
		ro, err := opts.RepoOptions(ctx, repo)
		var l v1.Layer
		if err == nil {
			l, err = remote.Layer(ref, ro...)
		}
		if err != nil {
			return nil, transport.Classify(ref.String(), err, opts)
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, transport.Classify(ref.String(), err, opts)
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, maxKitfile+1))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, ref, err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != h.Hex {
			return nil, fmt.Errorf("%s %s: %w", what, ref, transport.ErrDigestMismatch)
		}
		return b, nil
	}
}
