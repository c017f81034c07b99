package model_test

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
)

const kitOps = "application/vnd.kitops.modelkit."

// pushKit pushes a ModelKit of tar layers (media type suffix → tar).
func pushKit(t *testing.T, reg *testoci.Registry, repoTag string, layers ...testoci.Layer) {
	t.Helper()
	_, err := testoci.PushArtifact(reg.Host, repoTag, "", kitOps+"config.v1+json",
		[]byte(`{"manifestVersion":"1.0.0","package":{"name":"llm"},"model":{"name":"llm","path":"model.gguf"}}`), layers)
	require.NoError(t, err)
}

// diskUsage is what the trees under roots take as du counts it: the
// blocks of every inode once, however many hard links lead to it.
func diskUsage(t *testing.T, roots ...string) int64 {
	t.Helper()
	type id struct{ dev, ino uint64 }
	seen := map[id]bool{}
	var n int64
	for _, root := range roots {
		require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			st := fi.Sys().(*syscall.Stat_t)
			k := id{uint64(st.Dev), st.Ino}
			if !seen[k] {
				seen[k] = true
				n += st.Blocks * 512
			}
			return nil
		}))
	}
	return n
}

// A tar layer is on disk once: the version folder's files are hard links
// to the layer's tree in the store, and its compressed blob is gone. A
// model of one 24 MiB incompressible layer takes at most 1.15 times its
// unpacked size, stateDir and model path together.
func TestTarLayerIsOneCopyOnDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: a 24 MiB incompressible layer through gzip (12 s under -race); make test runs it, -short skips it")
	}
	n := newModelNode(t)
	weights := make([]byte, 24<<20)
	_, _ = rand.Read(weights)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write(tarOf(t, "model.gguf", string(weights)))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	pushKit(t, n.reg, "models/llm:v1", testoci.Layer{MediaType: kitOps + "model.v1.tar+gzip", Data: gz.Bytes()})
	m := n.model("llm", "models/llm:v1")
	n.apply(m)
	require.Equal(t, string(weights), n.read("llm", "model.gguf"))

	used := diskUsage(t, n.StateDir, n.Path(modelAllow))
	ratio := float64(used) / float64(len(weights))
	t.Logf("stateDir and model path: %d bytes on disk for %d bytes unpacked (%d compressed): %.3fx", used, len(weights), gz.Len(), ratio)
	require.LessOrEqual(t, ratio, 1.15)
	_, err = os.Stat(filepath.Join(n.StateDir, "blobs", "sha256", testoci.Digest(gz.Bytes())[7:]))
	require.ErrorIs(t, err, fs.ErrNotExist, "the layer's blob is kept beside its tree")

	cs, _ := n.apply(m)
	require.True(t, cs.Empty(), reasons(cs))
}

// A file of a tar layer edited in place changes the layer's tree too (the
// file is a hard link to it): the drift is found, that layer's tree is
// dropped and downloaded again, alone, and the folder is restored. The
// other layer's tree stays.
func TestTarLayerEditedInPlaceIsFetchedAgainAlone(t *testing.T) {
	n := newModelNode(t)
	model := tarOf(t, "model.gguf", strings.Repeat("weights ", 4096))
	docs := tarOf(t, "README.md", "# llm\n", "docs/usage.md", "run it\n")
	pushKit(t, n.reg, "models/llm:v1",
		testoci.Layer{MediaType: kitOps + "model.v1.tar", Data: model},
		testoci.Layer{MediaType: kitOps + "docs.v1.tar", Data: docs})
	m := n.model("llm", "models/llm:v1")
	n.apply(m)
	readme, err := os.Stat(filepath.Join(n.target("llm"), "README.md"))
	require.NoError(t, err)

	p := filepath.Join(n.target("llm"), "model.gguf")
	require.NoError(t, os.Chmod(p, 0o644))
	require.NoError(t, os.WriteFile(p, []byte("tampered"), 0o644))
	require.NoError(t, os.Chmod(p, 0o444))

	var mu sync.Mutex
	var gets []string
	n.reg.Use(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			mu.Lock()
			gets = append(gets, r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:])
			mu.Unlock()
		}
		return false
	})
	cs, _ := n.apply(m)
	require.Len(t, cs.Actions, 1, reasons(cs))
	require.True(t, cs.Actions[0].IsDrift())
	require.Contains(t, cs.Actions[0].Reason, "model.gguf edited")
	mu.Lock()
	require.Equal(t, []string{testoci.Digest(model)}, gets, "blob GETs to restore the folder")
	mu.Unlock()
	require.Equal(t, strings.Repeat("weights ", 4096), n.read("llm", "model.gguf"))
	require.Equal(t, "# llm\n", n.read("llm", "README.md"))
	require.Equal(t, "run it\n", n.read("llm", "docs/usage.md"))
	again, err := os.Stat(filepath.Join(n.target("llm"), "README.md"))
	require.NoError(t, err)
	require.True(t, os.SameFile(readme, again), "the other layer's tree was made again")

	cs, _ = n.apply(m)
	require.True(t, cs.Empty(), reasons(cs))
}
