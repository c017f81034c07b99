package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
)

// The drivers are made by the first tick and kept: every later tick of the
// same reconciler runs through them, and still reads the node and the
// registry afresh (a tag moved between ticks is pulled) and counts only
// its own downloads.
func TestNodeIsKeptFromTickToTick(t *testing.T) {
	reg := testoci.Start(t)
	reg.PushFiles(t, "models/m:v1", map[string][]byte{"model.onnx": []byte("one")})
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"+
		"  models:\n    - {name: m, ref: "+reg.Ref("models/m:v1")+"}\n  files:\n    - {path: /etc/infer/a, content: a}\n")
	repo.Commit("one")
	c := newConfig(t, repo.Dir())
	c.Registries.Insecure = []string{reg.Host}
	r := &Reconciler{Config: c}
	model := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(c.StateDir, "models", "m", "current", "model.onnx"))
		require.NoError(t, err)
		return string(b)
	}

	res, err := r.Apply(t.Context())
	require.NoError(t, err)
	require.Equal(t, "one", model())
	require.Positive(t, res.Downloaded)
	n := r.nodes.node
	require.NotNil(t, n)

	reg.PushFiles(t, "models/m:v1", map[string][]byte{"model.onnx": []byte("two")})
	require.NoError(t, os.WriteFile(filepath.Join(c.Root, "etc/infer/a"), []byte("edited"), 0o644))
	res, err = r.Apply(t.Context())
	require.NoError(t, err)
	require.Equal(t, "two", model(), "the moved tag is resolved again")
	require.Len(t, res.Drift, 1, "the node is observed again")
	require.Len(t, res.Applied, 2)

	res, err = r.Apply(t.Context())
	require.NoError(t, err)
	require.Empty(t, res.Applied)
	require.Zero(t, res.Downloaded, "a tick counts its own downloads, not those of the ticks before")
	require.Same(t, n, r.nodes.node, "one node for every tick")
}

// The model driver downloads under downloads.maxRate, as every registry
// download does.
func TestModelOptionsCapDownloads(t *testing.T) {
	rate, err := manifest.ParseRate("2MiB/s")
	require.NoError(t, err)
	c := &manifest.AgentConfig{Downloads: manifest.Downloads{MaxRate: rate}}
	require.Equal(t, int64(2<<20), ModelOptions(c).Registry.MaxRate.BytesPerSecond())
}
