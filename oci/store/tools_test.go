package store

// Model artifacts built by hand from the published specs of the tools
// that make them (CNCF model-spec for modctl's ModelPack, KitOps for
// ModelKits), pushed to CNCF distribution (Debian's docker-registry) and
// materialised as the tool's own extract or unpack lays them out.

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
)

// pushSpec pushes an artifact with the manifest artifactType its tool
// sets to a registry at host, and returns its repository and digest.
func pushSpec(t *testing.T, host, repoTag, artifactType string, config layer, layers ...layer) (name.Repository, v1.Hash) {
	t.Helper()
	dg, err := testoci.PushArtifact(host, repoTag, artifactType, config.MediaType, config.Data, layers)
	require.NoError(t, err)
	d, err := v1.NewHash(dg)
	require.NoError(t, err)
	repo, err := name.NewRepository(host+"/"+strings.Split(repoTag, ":")[0], name.Insecure)
	require.NoError(t, err)
	return repo, d
}

// pullInto fetches artifact repo@d with every blob into a new store and
// materialises it; it returns the store, the artifact and the version
// folder.
func pullInto(t *testing.T, repo name.Repository, d v1.Hash) (*Store, *modelkit.Artifact, string) {
	t.Helper()
	ctx := context.Background()
	s := newTestStore(t)
	opts := transport.Options{Insecure: []string{repo.RegistryStr()}}
	a, _, err := s.FetchArtifact(ctx, repo, d, modelkit.NodePlatform(), opts)
	require.NoError(t, err)
	// By repository, as the model driver fetches them: a base
	// ModelKit's layers are in its own.
	for _, b := range a.Blobs() {
		r := repo
		if br := a.BlobRepo(b.Digest); br != "" {
			r, err = name.NewRepository(br, name.Insecure)
			require.NoError(t, err)
		}
		_, err = s.FetchAll(ctx, r, []v1.Descriptor{b}, 1, opts)
		require.NoError(t, err)
	}
	dir := filepath.Join(t.TempDir(), "versions", d.Hex)
	require.NoError(t, s.Materialise(ctx, a, dir, 0))
	return s, a, dir
}

// fileMetadataOf is the org.cncf.model.file.metadata+json annotation
// modctl writes on a raw layer (model-spec's FileMetadata: the mode is
// the permission bits as a number, typeflag 0 a regular file).
func fileMetadataOf(t *testing.T, name string, mode fs.FileMode, body string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"name": filepath.Base(name), "mode": uint32(mode), "uid": 1000, "gid": 1000,
		"size": len(body), "mtime": "2025-07-01T10:00:00.123456789+02:00", "typeflag": 0})
	require.NoError(t, err)
	return string(b)
}

// A ModelPack's raw files keep the modes their file metadata annotation
// gives, under tend's write-bit policy (read-only, exec bits kept, an
// owner-only file stays owner-only), in the current (vnd.cncf) and the
// legacy CNAI (vnd.cnai, modctl v0.2.x) media types alike. A file whose
// mode differs from the blob's 0444 is a copy; the blob is left alone.
func TestModelPackFileModes(t *testing.T) {
	host := testoci.StartDistribution(t)
	const script = "#!/bin/sh\necho ran from \"$(dirname \"$0\")\"\n"
	for _, spec := range []struct {
		name, mediaPrefix, annotationPrefix, artifactType string
	}{
		// model-spec v0.0.7 on: application/vnd.cncf.model.*,
		// org.cncf.model.filepath and org.cncf.model.file.metadata+json.
		{"ModelPack", "application/vnd.cncf.model.", "org.cncf.model.", "application/vnd.cncf.model.manifest.v1+json"},
		// model-spec up to v0.0.6 (modctl v0.2.x pushes it):
		// application/vnd.cnai.model.*, org.cnai.model.filepath and
		// org.cnai.model.file.metadata+json.
		{"legacy CNAI ModelPack", "application/vnd.cnai.model.", "org.cnai.model.", "application/vnd.cnai.model.manifest.v1+json"},
	} {
		t.Run(spec.name, func(t *testing.T) {
			raw := func(kind, p string, mode fs.FileMode, body string) layer {
				return layer{MediaType: spec.mediaPrefix + kind + ".v1.raw", Data: []byte(body), Annotations: map[string]string{
					spec.annotationPrefix + "filepath":           p,
					spec.annotationPrefix + "file.metadata+json": fileMetadataOf(t, p, mode, body),
				}}
			}
			config := layer{MediaType: spec.mediaPrefix + "config.v1+json",
				Data: []byte(`{"descriptor":{"name":"detector","version":"8"},"config":{"format":"safetensors"},"modelfs":{"type":"layers","diffIds":[]}}`)}
			layers := []layer{
				raw("weight", "model.safetensors", 0o644, "weights"),
				raw("code", "bin/run.sh", 0o755, script),
				raw("code", "bin/owner.sh", 0o700, "#!/bin/sh\n"),
				raw("weight.config", "secrets/token", 0o600, "hf_secret"),
				raw("doc", "LICENSE", 0o664, "MIT\n"),
				{MediaType: spec.mediaPrefix + "doc.v1.tar+gzip", Data: tgz(t, extract.Gzip, file("README.md", "# detector\n"))},
			}
			repo, d := pushSpec(t, host, "models/detector:v1", spec.artifactType, config, layers...)
			s, a, dir := pullInto(t, repo, d)
			require.Equal(t, modelkit.FormatModelPack, a.Format)

			for p, want := range map[string]fs.FileMode{
				"model.safetensors": 0o444, "bin/run.sh": 0o555, "bin/owner.sh": 0o500,
				"secrets/token": 0o400, "LICENSE": 0o444, "README.md": 0o444,
			} {
				fi, err := os.Stat(filepath.Join(dir, p))
				require.NoError(t, err)
				require.Equal(t, want, fi.Mode().Perm(), p)
			}
			for _, l := range layers[:5] {
				p := l.Annotations[spec.annotationPrefix+"filepath"]
				got, err := os.ReadFile(filepath.Join(dir, p))
				require.NoError(t, err)
				require.Equal(t, string(l.Data), string(got), p)
				fi, err := os.Stat(filepath.Join(dir, p))
				require.NoError(t, err)
				dg, err := v1.NewHash(testoci.Digest(l.Data))
				require.NoError(t, err)
				blob, err := os.Stat(s.Path(dg))
				require.NoError(t, err)
				require.Zero(t, blob.Mode().Perm()&0o111, "the blob of %s, which other versions may link, was given its mode", p)
				require.Equal(t, fi.Mode().Perm() == 0o444, os.SameFile(fi, blob), "%s: a hard link to its blob exactly when its mode is the blob's", p)
			}

			out, err := exec.Command(filepath.Join(dir, "bin", "run.sh")).CombinedOutput()
			require.NoError(t, err, "run.sh does not run: %s", out)
			require.Equal(t, "ran from "+filepath.Join(dir, "bin")+"\n", string(out))
		})
	}
}

// kitConfig is a ModelKit's config (application/vnd.kitops.modelkit.config.v1+json):
// its Kitfile as JSON, with each layer's digest and diff id, as kit pack
// writes it. kitYAML is the Kitfile kit unpack writes from it, as
// KitOps's own KitFile.MarshalToYAML gives it (gopkg.in/yaml.v3, indent 2).
const (
	kitConfig = `{"manifestVersion":"1.0.0",` +
		`"package":{"name":"detector","version":"8.1.0","description":"Finds people: and cars","license":"Apache-2.0","authors":["Ada <ada@example.com>","Bob"]},` +
		`"model":{"name":"detector","path":"model/model.onnx","framework":"onnx","format":"onnx","version":"8",` +
		`"parts":[{"name":"tokenizer","path":"tokenizer.json","type":"tokenizer","digest":"%[2]s","diffId":"%[2]s"}],` +
		`"parameters":{"threshold":0.4,"classes":["person","car"],"size":1024,"nested":{"b":true,"a":null,"big":1200000,"hex":"0xFF"}},"digest":"%[1]s","diffId":"%[1]s"},` +
		`"code":[{"path":"src","description":"pre and post","license":"MIT","digest":"%[3]s"}],` +
		`"datasets":[{"name":"val","path":"data/val.csv","parameters":{"rows":100},"digest":"%[4]s"}],` +
		`"docs":[{"path":"README.md","description":"read me","digest":"%[5]s"}]}`
	kitYAML = `manifestVersion: 1.0.0
package:
  name: detector
  version: 8.1.0
  description: 'Finds people: and cars'
  license: Apache-2.0
  authors: [Ada <ada@example.com>, Bob]
model:
  name: detector
  path: model/model.onnx
  framework: onnx
  format: onnx
  version: "8"
  parts:
    - name: tokenizer
      path: tokenizer.json
      type: tokenizer
  parameters:
    classes:
      - person
      - car
    nested:
      a: null
      b: true
      big: 1.2e+06
      hex: "0xFF"
    size: 1024
    threshold: 0.4
code:
  - path: src
    description: pre and post
    license: MIT
datasets:
  - name: val
    path: data/val.csv
    parameters:
      rows: 100
docs:
  - path: README.md
    description: read me
`
)

// A ModelKit's version folder holds its Kitfile, as kit unpack writes it
// (KitOps media types application/vnd.kitops.modelkit.{config.v1+json,
// model.v1.tar, modelpart.v1.tar, code.v1.tar+gzip, dataset.v1.tar,
// docs.v1.tar}; no artifactType), beside the layers' files.
func TestModelKitKitfile(t *testing.T) {
	host := testoci.StartDistribution(t)
	const kit = "application/vnd.kitops.modelkit."
	layers := []layer{
		{MediaType: kit + "model.v1.tar", Data: tgz(t, extract.Uncompressed, file("model/model.onnx", "weights"))},
		{MediaType: kit + "modelpart.v1.tar", Data: tgz(t, extract.Uncompressed, file("tokenizer.json", "{}"))},
		{MediaType: kit + "code.v1.tar+gzip", Data: tgz(t, extract.Gzip, file("src/pre.py", "print()\n"))},
		{MediaType: kit + "dataset.v1.tar", Data: tgz(t, extract.Uncompressed, file("data/val.csv", "a,b\n"))},
		{MediaType: kit + "docs.v1.tar", Data: tgz(t, extract.Uncompressed, file("README.md", "# detector\n"))},
	}
	digests := make([]any, len(layers))
	for i, l := range layers {
		digests[i] = testoci.Digest(l.Data)
	}
	config := layer{MediaType: kit + "config.v1+json", Data: fmt.Appendf(nil, kitConfig, digests...)}
	repo, d := pushSpec(t, host, "models/detector:v1", "", config, layers...)
	_, a, dir := pullInto(t, repo, d)
	require.Equal(t, modelkit.FormatKitOps, a.Format)
	b, err := os.ReadFile(filepath.Join(dir, modelkit.KitfileName))
	require.NoError(t, err)
	require.Equal(t, kitYAML, string(b))
	fi, err := os.Stat(filepath.Join(dir, modelkit.KitfileName))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o444), fi.Mode().Perm())
	for p, want := range map[string]string{"model/model.onnx": "weights", "tokenizer.json": "{}", "src/pre.py": "print()\n", "data/val.csv": "a,b\n", "README.md": "# detector\n"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		require.NoError(t, err)
		require.Equal(t, want, string(b), p)
	}

	t.Run("a ModelKit of its Kitfile alone", func(t *testing.T) {
		config := layer{MediaType: kit + "config.v1+json", Data: []byte(`{"manifestVersion":"1.0.0","package":{"name":"empty"}}`)}
		repo, d := pushSpec(t, host, "models/empty:v1", "", config)
		_, _, dir := pullInto(t, repo, d)
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1)
		b, err := os.ReadFile(filepath.Join(dir, modelkit.KitfileName))
		require.NoError(t, err)
		require.Equal(t, "manifestVersion: 1.0.0\npackage:\n  name: empty\n", string(b))
	})
}

// A ModelKit whose model is a base ModelKit (its Kitfile's model.path a
// reference, as kit pack writes for `model: {path: REGISTRY/REPO:TAG}`)
// gets the base's model and model part layers, as kit unpack does
// (unpackParent: the base's docs, datasets, code and Kitfile are left
// out), pulled from the base's repository and pinned by digest; its own
// Kitfile is written. Inspect reads the same.
func TestModelKitBaseResolved(t *testing.T) {
	host := testoci.StartDistribution(t)
	ctx := context.Background()
	// KitOps media types (kitops-ml/kitops pkg/lib/constants/mediaType.go):
	// config application/vnd.kitops.modelkit.config.v1+json, layers
	// application/vnd.kitops.modelkit.<type>.v1.tar.
	const kit = "application/vnd.kitops.modelkit."
	base := host + "/models/base:v1"
	_, baseDigest := pushSpec(t, host, "models/base:v1", "", layer{MediaType: kit + "config.v1+json",
		Data: []byte(`{"manifestVersion":"1.0.0","model":{"path":"model.gguf"},"docs":[{"path":"BASE.md"}]}`)},
		layer{MediaType: kit + "model.v1.tar", Data: tgz(t, extract.Uncompressed, file("model.gguf", "base weights"))},
		layer{MediaType: kit + "docs.v1.tar", Data: tgz(t, extract.Uncompressed, file("BASE.md", "# base\n"))})
	for _, tt := range []struct {
		name   string
		layers []layer
		files  []string
	}{
		{"with a part and docs", []layer{
			{MediaType: kit + "modelpart.v1.tar", Data: tgz(t, extract.Uncompressed, file("lora.safetensors", "adapter"))},
			{MediaType: kit + "docs.v1.tar", Data: tgz(t, extract.Uncompressed, file("README.md", "# tuned\n"))},
		}, []string{modelkit.KitfileName, "README.md", "lora.safetensors", "model.gguf"}},
		{"without layers", nil, []string{modelkit.KitfileName, "model.gguf"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			config := layer{MediaType: kit + "config.v1+json",
				Data: []byte(`{"manifestVersion":"1.0.0","package":{"name":"tuned"},"model":{"name":"tuned","path":"` + base + `","parts":[{"path":"lora.safetensors"}]}}`)}
			repo, d := pushSpec(t, host, "models/tuned:"+strings.ReplaceAll(tt.name, " ", "-"), "", config, tt.layers...)
			_, a, dir := pullInto(t, repo, d)
			require.Equal(t, []modelkit.Base{{Ref: base, Digest: baseDigest}}, a.Bases)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			require.Equal(t, tt.files, names)
			b, err := os.ReadFile(filepath.Join(dir, "model.gguf"))
			require.NoError(t, err)
			require.Equal(t, "base weights", string(b))
			b, err = os.ReadFile(filepath.Join(dir, modelkit.KitfileName))
			require.NoError(t, err)
			require.Contains(t, string(b), "path: "+base, "the ModelKit's own Kitfile")

			in, err := modelkit.Inspect(ctx, repo, d, modelkit.NodePlatform(), transport.Options{Insecure: []string{host}})
			require.NoError(t, err)
			require.Equal(t, a.Bases, in.Bases)
			require.Equal(t, a.Blobs(), in.Blobs())
		})
	}
}

// A base that cannot be read is an error naming the ModelKit, the
// reference and why: not found, not a ModelKit, a loop, a chain longer
// than kit follows.
func TestModelKitBaseUnreadable(t *testing.T) {
	reg := testoci.Start(t)
	ctx := context.Background()
	const kit = "application/vnd.kitops.modelkit."
	push := func(tag, modelPath string) (name.Repository, v1.Hash) {
		return pushSpec(t, reg.Host, "models/kit:"+tag, "", layer{MediaType: kit + "config.v1+json",
			Data: []byte(`{"manifestVersion":"1.0.0","model":{"path":"` + modelPath + `"}}`)})
	}
	ref := func(tag string) string { return reg.Host + "/models/kit:" + tag }
	reg.PushFiles(t, "models/oras:v1", map[string][]byte{"model.gguf": []byte("w")})
	for i := range modelkit.MaxModelRefChain + 1 {
		push(fmt.Sprint("chain", i), ref(fmt.Sprint("chain", i+1)))
	}
	push(fmt.Sprint("chain", modelkit.MaxModelRefChain+1), "model.gguf")
	push("loop-b", ref("loop-a"))
	for _, tt := range []struct {
		tag, path string
		want      []string
	}{
		{"missing", ref("nothing"), []string{"is a ModelKit whose model is the ModelKit " + ref("nothing") + " (model.path in its Kitfile): tag nothing not found in " + reg.Host + "/models/kit"}},
		{"oras", reg.Host + "/models/oras:v1", []string{"is not a ModelKit (config application/vnd.oci.empty.v1+json)"}},
		{"loop-a", ref("loop-b"), []string{"its bases loop: " + ref("loop-b") + " => " + ref("loop-a") + " => " + ref("loop-b")}},
		{"chain", ref("chain0"), []string{"its bases go on past 10 (" + ref("chain0") + " => ", ref("chain9") + " => " + ref("chain10") + "); kit unpack stops there too"}},
	} {
		repo, d := push(tt.tag, tt.path)
		s := newTestStore(t)
		_, _, err := s.FetchArtifact(ctx, repo, d, modelkit.NodePlatform(), transport.Options{Insecure: []string{reg.Host}})
		require.ErrorIs(t, err, modelkit.ErrBaseModelKit, tt.tag)
		require.ErrorContains(t, err, "model artifact "+d.String()+" is a ModelKit whose model is the ModelKit "+tt.path)
		for _, w := range tt.want {
			require.ErrorContains(t, err, w)
		}
		_, err = modelkit.Inspect(ctx, repo, d, modelkit.NodePlatform(), transport.Options{Insecure: []string{reg.Host}})
		require.ErrorIs(t, err, modelkit.ErrBaseModelKit, tt.tag)
	}
}

// A file copied for its mode is counted against the room unpacking has.
func TestMaterialiseModeCopyIsBudgeted(t *testing.T) {
	s := newTestStore(t)
	e := putEntry(t, s, "bin/run.sh", []byte(strings.Repeat("x", 8192)), false, "")
	e.Mode = 0o555
	a := &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{e}}
	err := s.Materialise(context.Background(), a, filepath.Join(t.TempDir(), "v"), 4096)
	require.ErrorIs(t, err, extract.ErrTooLarge)
	dir := filepath.Join(t.TempDir(), "v")
	require.NoError(t, s.Materialise(context.Background(), a, dir, 1<<20))
	fi, err := os.Stat(filepath.Join(dir, "bin/run.sh"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o555), fi.Mode().Perm())
}
