package store

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
)

// layer is a blob pushed as one layer (or the config) of an artifact.
type layer = testoci.Layer

func titled(title string) map[string]string { return map[string]string{annotationTitle: title} }

// rawManifest pushes bytes as they are, with their media type.
type rawManifest struct {
	body []byte
	mt   types.MediaType
}

func (r rawManifest) RawManifest() ([]byte, error)        { return r.body, nil }
func (r rawManifest) MediaType() (types.MediaType, error) { return r.mt, nil }

// pushManifest pushes a manifest or index (marshalled from m) under ref,
// a tag or "" for by digest, and returns its digest and size.
func pushManifest(t *testing.T, repo name.Repository, tag string, mt types.MediaType, m any) (v1.Hash, int64) {
	t.Helper()
	body, err := json.Marshal(m)
	require.NoError(t, err)
	d, size, err := v1.SHA256(bytes.NewReader(body))
	require.NoError(t, err)
	var ref name.Reference = repo.Digest(d.String())
	if tag != "" {
		ref = repo.Tag(tag)
	}
	require.NoError(t, remote.Put(ref, rawManifest{body, mt}))
	return d, size
}

// pushArtifact pushes an OCI manifest with the given config and layers,
// as ORAS, KitOps or modctl lay them out, under tag, and returns its
// digest.
func pushArtifact(t *testing.T, reg *testoci.Registry, tag string, config layer, layers ...layer) v1.Hash {
	t.Helper()
	d, err := v1.NewHash(reg.Push(t, testRepoName+":"+tag, config.MediaType, config.Data, layers))
	require.NoError(t, err)
	return d
}

const testRepoName = "models/detector"

// testRepo is a repository in a fresh in-process registry.
func testRepo(t *testing.T) (name.Repository, *testoci.Registry) {
	reg := testoci.Start(t)
	repo, err := name.NewRepository(reg.Ref(testRepoName))
	require.NoError(t, err)
	return repo, reg
}

var emptyConfig = layer{MediaType: string(types.OCIEmptyJSON), Data: []byte("{}")}

func tgz(t *testing.T, compression string, entries ...entry) []byte {
	return tarball(t, compression, entries...).Bytes()
}

func file(name, body string) entry { return entry{name: name, typ: tar.TypeReg, body: body} }

func TestArtifactLayouts(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		config  layer
		layers  []layer
		format  string
		entries []string // path, "+" for unpacked, with the compression
		files   map[string]string
	}{
		{
			name:   "ORAS files and an unpacked folder",
			config: emptyConfig,
			layers: []layer{
				{MediaType: string(types.OCIUncompressedLayer), Data: []byte("weights"), Annotations: titled("model.onnx")},
				{MediaType: "text/plain", Data: []byte("person\n"), Annotations: titled("meta/labels.txt")},
				{MediaType: string(types.OCILayer), Data: tgz(t, extract.Gzip,
					entry{name: "tokenizer", typ: tar.TypeDir, mode: 0o755},
					file("tokenizer/vocab.json", `{"a":1}`),
					entry{name: "tokenizer/bpe/", typ: tar.TypeDir, mode: 0o755},
					file("tokenizer/bpe/merges.txt", "a b\n"),
				), Annotations: map[string]string{annotationTitle: "tokenizer", annotationORASUnpack: "true"}},
			},
			format:  modelkit.FormatORAS,
			entries: []string{"meta/labels.txt", "model.onnx", "tokenizer+gzip"},
			files:   map[string]string{"model.onnx": "weights", "meta/labels.txt": "person\n", "tokenizer/vocab.json": `{"a":1}`, "tokenizer/bpe/merges.txt": "a b\n"},
		},
		{
			name:   "tar+gzip layers in the version folder",
			config: layer{MediaType: string(types.OCIConfigJSON), Data: []byte("{}")},
			layers: []layer{
				{MediaType: string(types.OCILayer), Data: tgz(t, extract.Gzip, file("model/model.onnx", "weights"))},
				{MediaType: string(types.OCILayer), Data: tgz(t, extract.Gzip, file("labels/names.txt", "person\n"))},
			},
			format:  modelkit.FormatTar,
			entries: []string{"+gzip", "+gzip"},
			files:   map[string]string{"model/model.onnx": "weights", "labels/names.txt": "person\n"},
		},
		{
			name:   "tar+zstd, tar and docker layers",
			config: layer{MediaType: string(types.OCIConfigJSON), Data: []byte("{}")},
			layers: []layer{
				{MediaType: string(types.OCILayerZStd), Data: tgz(t, extract.Zstd, file("model.onnx", "weights"))},
				{MediaType: string(types.OCIUncompressedLayer), Data: tgz(t, extract.Uncompressed, file("config.yaml", "a: 1\n"))},
				{MediaType: string(types.DockerLayer), Data: tgz(t, extract.Gzip, file("labels.txt", "person\n"))},
			},
			format:  modelkit.FormatTar,
			entries: []string{"+", "+gzip", "+zstd"},
			files:   map[string]string{"model.onnx": "weights", "config.yaml": "a: 1\n", "labels.txt": "person\n"},
		},
		{
			name:   "KitOps ModelKit",
			config: layer{MediaType: mediaTypeKitOpsConfig, Data: []byte(`{"manifestVersion":"1.0.0","model":{"path":"model.onnx"}}`)},
			layers: []layer{
				{MediaType: "application/vnd.kitops.modelkit.model.v1.tar+gzip", Data: tgz(t, extract.Gzip, file("model.onnx", "weights"))},
				{MediaType: "application/vnd.kitops.modelkit.modelpart.v1.tar+zstd", Data: tgz(t, extract.Zstd, file("parts/tokenizer.json", "{}"))},
				{MediaType: "application/vnd.kitops.modelkit.code.v1.tar", Data: tgz(t, extract.Uncompressed, file("src/run.py", "print()\n"))},
				{MediaType: "application/vnd.kitops.modelkit.docs.v1.tar+gzip", Data: tgz(t, extract.Gzip, file("README.md", "# detector\n")),
					Annotations: titled("README.md")}, // a title does not make a KitOps tar a file
			},
			format:  modelkit.FormatKitOps,
			entries: []string{"+", "+gzip", "+gzip", "+zstd"},
			files: map[string]string{"model.onnx": "weights", "parts/tokenizer.json": "{}", "src/run.py": "print()\n", "README.md": "# detector\n",
				"Kitfile": "manifestVersion: 1.0.0\nmodel:\n  path: model.onnx\n"}, // as kit unpack writes it
		},
		{
			name:   "CNCF ModelPack, raw and tar",
			config: layer{MediaType: mediaTypeModelPackConfig, Data: []byte(`{"descriptor":{"name":"detector"}}`)},
			layers: []layer{
				{MediaType: "application/vnd.cncf.model.weight.v1.raw", Data: []byte("weights"),
					Annotations: map[string]string{annotationFilepath: "model.safetensors", annotationTitle: "model.safetensors"}},
				{MediaType: "application/vnd.cncf.model.weight.config.v1.raw", Data: []byte("{}"), Annotations: map[string]string{annotationFilepath: "cfg/config.json"}},
				{MediaType: "application/vnd.cncf.model.doc.v1.tar", Data: tgz(t, extract.Uncompressed, file("README.md", "# detector\n"))},
				{MediaType: "application/vnd.cncf.model.code.v1.tar+gzip", Data: tgz(t, extract.Gzip, file("src/run.py", "print()\n"))},
			},
			format:  modelkit.FormatModelPack,
			entries: []string{"+", "+gzip", "cfg/config.json", "model.safetensors"},
			files:   map[string]string{"model.safetensors": "weights", "cfg/config.json": "{}", "README.md": "# detector\n", "src/run.py": "print()\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo, reg := testRepo(t)
			d := pushArtifact(t, reg, "v1", tt.config, tt.layers...)
			s, err := NewStore(t.TempDir(), nil)
			require.NoError(t, err)
			a, n, err := s.FetchArtifact(ctx, repo, d, modelkit.NodePlatform(), transport.Options{})
			require.NoError(t, err)
			require.Positive(t, n)
			require.Equal(t, d, a.Digest)
			require.Equal(t, tt.format, a.Format)
			var got []string
			var size int64
			for _, e := range a.Entries {
				s := e.Path
				if e.Unpack {
					s += "+" + e.Compression
				}
				got = append(got, s)
				size += e.Size
			}
			slices.Sort(got) // tar layers in the version folder are in digest order
			require.Equal(t, tt.entries, got)
			require.Equal(t, size, a.Size())
			require.Len(t, a.Manifests, 2, "the manifest and its config")
			require.Len(t, a.Blobs(), 2+len(tt.layers))

			_, err = s.FetchAll(ctx, repo, a.Blobs(), 2, transport.Options{})
			require.NoError(t, err)
			dir := filepath.Join(t.TempDir(), "versions", d.Hex)
			require.NoError(t, s.Materialise(ctx, a, dir, 0))
			var on []string
			require.NoError(t, filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
				if err == nil && !de.IsDir() {
					rel, _ := filepath.Rel(dir, p)
					on = append(on, filepath.ToSlash(rel))
				}
				return err
			}))
			require.Len(t, on, len(tt.files), "files in the version folder: %v", on)
			for p, body := range tt.files {
				b, err := os.ReadFile(filepath.Join(dir, p))
				require.NoError(t, err, p)
				require.Equal(t, body, string(b), p)
				fi, err := os.Stat(filepath.Join(dir, p))
				require.NoError(t, err)
				require.Zero(t, fi.Mode().Perm()&0o222, "%s is read-only", p)
			}
		})
	}
}

func TestArtifactLayoutErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		config layer
		layers []layer
		want   []string
	}{
		{
			name:   "unknown media types are listed",
			config: layer{MediaType: "application/vnd.acme.config+json", Data: []byte("{}")},
			layers: []layer{
				{MediaType: string(types.OCILayer), Data: tgz(t, extract.Gzip, file("a", "a"))},
				{MediaType: "application/vnd.acme.weights", Data: []byte("w")},
			},
			want: []string{"unknown model layout in sha256:",
				"layer media types [application/vnd.oci.image.layer.v1.tar+gzip, application/vnd.acme.weights]",
				"not understood: application/vnd.acme.weights", "config application/vnd.acme.config+json",
				"ORAS artifacts (layers with org.opencontainers.image.title)", "KitOps", "ModelPack"},
		},
		{
			name:   "no layers",
			config: emptyConfig,
			want:   []string{"has no layers"},
		},
		{
			name:   "ModelPack raw layer without a file name",
			config: layer{MediaType: mediaTypeModelPackConfig, Data: []byte("{}")},
			layers: []layer{{MediaType: "application/vnd.cncf.model.weight.v1.raw", Data: []byte("w")}},
			want:   []string{"application/vnd.cncf.model.weight.v1.raw", annotationFilepath},
		},
		{
			name:   "KitOps zip layer",
			config: layer{MediaType: mediaTypeKitOpsConfig, Data: []byte("{}")},
			layers: []layer{{MediaType: "application/vnd.kitops.modelkit.mcpb.v1.zip", Data: []byte("PK")}},
			want:   []string{"not understood: application/vnd.kitops.modelkit.mcpb.v1.zip"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo, reg := testRepo(t)
			d := pushArtifact(t, reg, "v1", tt.config, tt.layers...)
			s, err := NewStore(t.TempDir(), nil)
			require.NoError(t, err)
			_, _, err = s.FetchArtifact(ctx, repo, d, modelkit.NodePlatform(), transport.Options{})
			require.ErrorIs(t, err, modelkit.ErrUnknownLayout)
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
			require.Zero(t, reg.BlobBytes.Load(), "no blob is downloaded for an artifact tend cannot read")
		})
	}

	t.Run("unsafe paths are refused when the manifest is read", func(t *testing.T) {
		repo, reg := testRepo(t)
		d := pushArtifact(t, reg, "v1", emptyConfig, layer{MediaType: "application/octet-stream", Data: []byte("x"), Annotations: titled("../../etc/cron.d/evil")})
		s, err := NewStore(t.TempDir(), nil)
		require.NoError(t, err)
		_, _, err = s.FetchArtifact(ctx, repo, d, modelkit.NodePlatform(), transport.Options{})
		require.ErrorIs(t, err, extract.ErrUnsafeArchive)
		require.ErrorContains(t, err, d.String())
		require.ErrorContains(t, err, `"../../etc/cron.d/evil"`)
	})
}

func TestIndexByPlatform(t *testing.T) {
	ctx := context.Background()
	repo, reg := testRepo(t)
	child := func(arch string) v1.Descriptor {
		d := pushArtifact(t, reg, arch, emptyConfig, layer{MediaType: "application/octet-stream", Data: []byte(arch), Annotations: titled("model.onnx")})
		b, err := remote.Get(repo.Digest(d.String()))
		require.NoError(t, err)
		return v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: d, Size: int64(len(b.Manifest))}
	}
	amd, arm := child("amd64"), child("arm64")
	amd.Platform = &v1.Platform{OS: "linux", Architecture: "amd64"}
	arm.Platform = &v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}
	attest := child("attestation")
	attest.Platform = &v1.Platform{OS: "unknown", Architecture: "unknown"}
	index, _ := pushManifest(t, repo, "v1", types.OCIImageIndex, v1.IndexManifest{
		SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{amd, arm, attest},
	})

	for _, tt := range []struct {
		platform v1.Platform
		want     v1.Descriptor
	}{
		{v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, arm},
		{v1.Platform{OS: "linux", Architecture: "arm64"}, arm},
		{v1.Platform{OS: "linux", Architecture: "amd64"}, amd},
	} {
		t.Run(tt.platform.String(), func(t *testing.T) {
			s, err := NewStore(t.TempDir(), nil)
			require.NoError(t, err)
			a, _, err := s.FetchArtifact(ctx, repo, index, tt.platform, transport.Options{})
			require.NoError(t, err)
			require.Equal(t, index, a.Digest)
			require.Equal(t, []v1.Hash{index, tt.want.Digest}, a.Manifests[:2])
			require.Len(t, a.Manifests, 3, "index, manifest, config")
			for _, other := range []v1.Descriptor{amd, arm, attest} {
				require.Equal(t, other.Digest == tt.want.Digest, s.Has(other.Digest), "only the chosen manifest is fetched")
			}
			_, err = s.FetchAll(ctx, repo, a.Blobs(), 0, transport.Options{})
			require.NoError(t, err)
			dir := filepath.Join(t.TempDir(), "v")
			require.NoError(t, s.Materialise(ctx, a, dir, 0))
			b, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			require.Equal(t, tt.want.Platform.Architecture, string(b))

			again, err := s.LoadArtifact(index, tt.platform)
			require.NoError(t, err, "the store alone answers once fetched")
			require.Equal(t, a, again)
		})
	}

	t.Run("no match lists the platforms offered", func(t *testing.T) {
		s, err := NewStore(t.TempDir(), nil)
		require.NoError(t, err)
		_, _, err = s.FetchArtifact(ctx, repo, index, v1.Platform{OS: "linux", Architecture: "riscv64"}, transport.Options{})
		require.ErrorIs(t, err, modelkit.ErrNoPlatform)
		require.EqualError(t, err, "model index "+index.String()+": no manifest for this platform linux/riscv64; it offers linux/amd64, linux/arm64/v8")
	})
}

func TestPut(t *testing.T) {
	s, err := NewStore(t.TempDir(), nil)
	require.NoError(t, err)
	data := []byte(`{"schemaVersion":2}`)
	d, _, err := v1.SHA256(bytes.NewReader(data))
	require.NoError(t, err)

	err = s.Put(d, []byte(`{"schemaVersion":3}`))
	require.ErrorIs(t, err, transport.ErrDigestMismatch)
	require.False(t, s.Has(d))

	require.NoError(t, s.Put(d, data))
	b, err := os.ReadFile(s.Path(d))
	require.NoError(t, err)
	require.Equal(t, data, b)
	fi, err := os.Stat(s.Path(d))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o444), fi.Mode().Perm())
	require.NoError(t, s.Put(d, data), "putting it again is fine")
	left, err := os.ReadDir(s.dir.Partials())
	require.NoError(t, err)
	require.Empty(t, left, "no temporary file is left behind")
}

func TestLoadArtifactNotStored(t *testing.T) {
	s, err := NewStore(t.TempDir(), nil)
	require.NoError(t, err)
	missing := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}
	_, err = s.LoadArtifact(missing, modelkit.NodePlatform())
	require.ErrorIs(t, err, ErrNotStored)
	require.ErrorContains(t, err, missing.String())

	// An index whose manifest for this node was never fetched.
	index, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{
		{MediaType: types.OCIManifestSchema1, Digest: missing, Size: 100, Platform: &v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}},
	}})
	require.NoError(t, err)
	d, _, err := v1.SHA256(bytes.NewReader(index))
	require.NoError(t, err)
	require.NoError(t, s.Put(d, index))
	_, err = s.LoadArtifact(d, modelkit.NodePlatform())
	require.ErrorIs(t, err, ErrNotStored)
	require.ErrorContains(t, err, missing.String())
}

func TestFetchArtifactOnce(t *testing.T) {
	ctx := context.Background()
	repo, reg := testRepo(t)
	config := layer{MediaType: mediaTypeModelPackConfig, Data: []byte(`{"descriptor":{"name":"detector"}}`)}
	d := pushArtifact(t, reg, "v1", config,
		layer{MediaType: "application/vnd.cncf.model.weight.v1.raw", Data: []byte("weights"), Annotations: map[string]string{annotationFilepath: "model.safetensors"}})
	manifest, err := remote.Get(repo.Digest(d.String()))
	require.NoError(t, err)
	s, err := NewStore(t.TempDir(), nil)
	require.NoError(t, err)
	opts := transport.Options{}

	a, n, err := s.FetchArtifact(ctx, repo, d, modelkit.NodePlatform(), opts)
	require.NoError(t, err)
	require.Equal(t, int64(len(manifest.Manifest)+len(config.Data)), n, "the manifest and config, not the layer")
	require.False(t, s.Has(a.Entries[0].Digest), "layers are left to FetchAll")
	require.Equal(t, []v1.Descriptor{
		{Digest: d, Size: int64(len(manifest.Manifest)), MediaType: types.OCIManifestSchema1},
		{Digest: a.Manifests[1], Size: int64(len(config.Data)), MediaType: types.MediaType(mediaTypeModelPackConfig)},
		{Digest: a.Entries[0].Digest, Size: 7, MediaType: "application/vnd.cncf.model.weight.v1.raw"},
	}, a.Blobs())

	reg.Requests.Store(0)
	again, n, err := s.FetchArtifact(ctx, repo, d, modelkit.NodePlatform(), opts)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, reg.Requests.Load(), "a stored manifest is not asked for again")
	require.Equal(t, a, again)
}

func TestFetchArtifactMissing(t *testing.T) {
	repo, _ := testRepo(t)
	s, err := NewStore(t.TempDir(), nil)
	require.NoError(t, err)
	missing := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)}
	_, _, err = s.FetchArtifact(context.Background(), repo, missing, modelkit.NodePlatform(), transport.Options{})
	require.ErrorIs(t, err, transport.ErrNotFound)
	require.False(t, s.Has(missing))
}

func TestLoadArtifactNestedIndex(t *testing.T) {
	s, err := NewStore(t.TempDir(), nil)
	require.NoError(t, err)
	put := func(m any) v1.Hash {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		d, _, err := v1.SHA256(bytes.NewReader(b))
		require.NoError(t, err)
		require.NoError(t, s.Put(d, b))
		return d
	}
	inner := put(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{}})
	outer := put(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{{MediaType: types.OCIImageIndex, Digest: inner}}})
	_, err = s.LoadArtifact(outer, modelkit.NodePlatform())
	require.ErrorContains(t, err, "model manifest "+inner.String()+": an index inside an index is not supported")
}
