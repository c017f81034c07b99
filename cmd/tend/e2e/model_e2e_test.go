package e2e

// End-to-end test of models: the built tend binary pulls an ORAS artifact,
// pushed with oras-go as the oras CLI pushes it, from CNCF distribution
// (Debian's docker-registry) running as a separate server.

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/file"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// distDevice declares one model, detector, at ref with its stable path
// under /opt/models.
func distDevice(ref string) string {
	return fmt.Sprintf(`apiVersion: tend.dev/v1alpha1
kind: Device
metadata: {name: cam-017}
spec:
  models:
    - name: detector
      ref: %s
      path: /opt/models/detector
`, ref)
}

// orasPush pushes the files and folders named (relative to dir) as one
// ORAS artifact to host/repo:tag over plain HTTP, as `oras push` does: a
// file store, one layer per name (a folder becomes a tar+gzip layer
// annotated io.deis.oras.content.unpack), an OCI 1.1 manifest with an
// empty config, copied to the registry. It returns the manifest's
// descriptor and the layers' descriptors.
func orasPush(t *testing.T, host, repo, tag, dir string, names ...string) (ocispec.Descriptor, []ocispec.Descriptor) {
	t.Helper()
	ctx := context.Background()
	fs, err := file.New(dir)
	require.NoError(t, err)
	defer fs.Close()
	fs.TarReproducible = true // an unchanged folder is the same blob
	var layers []ocispec.Descriptor
	for _, n := range names {
		d, err := fs.Add(ctx, n, "", "")
		require.NoError(t, err)
		layers = append(layers, d)
	}
	desc, err := oras.PackManifest(ctx, fs, oras.PackManifestVersion1_1, testoci.ArtifactType,
		oras.PackManifestOptions{Layers: layers})
	require.NoError(t, err)
	require.NoError(t, fs.Tag(ctx, desc, tag))
	dst, err := remote.NewRepository(host + "/" + repo)
	require.NoError(t, err)
	dst.PlainHTTP = true
	_, err = oras.Copy(ctx, fs, tag, dst, tag, oras.DefaultCopyOptions)
	require.NoError(t, err)
	return desc, layers
}

// orasTag points tag at the manifest src (a tag) names, in host/repo.
func orasTag(t *testing.T, host, repo, src, tag string) {
	t.Helper()
	r, err := remote.NewRepository(host + "/" + repo)
	require.NoError(t, err)
	r.PlainHTTP = true
	_, err = oras.Tag(context.Background(), r, src, tag)
	require.NoError(t, err)
}

// storeBlobs names the blobs in a state dir's store.
func storeBlobs(t testing.TB, stateDir string) map[string]int64 {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(stateDir, "blobs", "sha256"))
	require.NoError(t, err)
	out := map[string]int64{}
	for _, e := range entries {
		fi, err := e.Info()
		require.NoError(t, err)
		out["sha256:"+e.Name()] = fi.Size()
	}
	return out
}

// newBlobs returns the keys of after that before lacks, sorted.
func newBlobs(before, after map[string]int64) []string {
	var out []string
	for k := range after {
		if _, ok := before[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func TestModelFromDistribution(t *testing.T) {
	host := testoci.StartDistribution(t)
	src := t.TempDir()
	model := make([]byte, 512<<10)
	_, _ = rand.Read(model)
	pushed := map[string][]byte{
		"model.onnx":           model,
		"labels.txt":           []byte("person\ncar\n"),
		"config.json":          []byte(`{"threshold": 0.4}` + "\n"),
		"tokenizer/vocab.txt":  []byte("a\nb\nc\n"),
		"tokenizer/bpe/merges": []byte("a b\n"),
	}
	for p, b := range pushed {
		require.NoError(t, os.MkdirAll(filepath.Join(src, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(src, p), b, 0o644))
	}
	names := []string{"model.onnx", "labels.txt", "config.json", "tokenizer"}
	_, layers := orasPush(t, host, "models/detector", "v1", src, names...)
	require.Equal(t, "true", layers[3].Annotations[file.AnnotationUnpack], "oras-go pushes a folder as a tar+gzip to unpack")

	repo := testgit.NewRepo(t)
	ref := host + "/models/detector:v1"
	repo.WriteFile("devices/cam-017/device.yaml", distDevice(ref))
	repo.Commit("detector v1")
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", host)
	stable := filepath.Join(n.root, "opt/models/detector")

	out, errOut, code := n.tend("plan", "--detailed-exitcode")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, out, "+ model/detector")
	require.Contains(t, out, ref+" → sha256:")
	require.Contains(t, out, "to download")
	require.NoFileExists(t, stable, "plan must change nothing")

	out, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "Apply complete: 1 action applied")
	for p, b := range pushed {
		got, err := os.ReadFile(filepath.Join(stable, p))
		require.NoError(t, err, p)
		require.Equal(t, b, got, p)
	}
	fi, err := os.Lstat(stable)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeSymlink, "the stable path is a symlink")

	out, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "0 to add, 0 to change", "apply twice does nothing the second time")

	// v2 changes one small file; v1 is retagged to it.
	before := storeBlobs(t, n.state)
	pushed["labels.txt"] = []byte("person\ncar\nbicycle\n")
	require.NoError(t, os.WriteFile(filepath.Join(src, "labels.txt"), pushed["labels.txt"], 0o644))
	v2, _ := orasPush(t, host, "models/detector", "v2", src, names...)
	orasTag(t, host, "models/detector", "v2", "v1")

	out, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "~ model/detector")
	require.Contains(t, out, "(tag v1 moved)")
	for p, b := range pushed {
		got, err := os.ReadFile(filepath.Join(stable, p))
		require.NoError(t, err, p)
		require.Equal(t, b, got, p)
	}
	after := storeBlobs(t, n.state)
	want := []string{string(v2.Digest), testoci.Digest(pushed["labels.txt"])}
	slices.Sort(want)
	require.Equal(t, want, newBlobs(before, after),
		"only the changed file's blob and the new manifest are downloaded")
	require.Subset(t, slices.Collect(maps.Keys(after)), slices.Collect(maps.Keys(before)), "v1's blobs are kept for a rollback")
	require.Contains(t, errOut, "msg=\"model downloaded\"")
	require.Contains(t, errOut, fmt.Sprintf("bytes=%d ", len(pushed["labels.txt"])))
}
