package render_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/render"
)

func TestRegistryResolver(t *testing.T) {
	reg := testoci.Start(t)
	weights := []byte(strings.Repeat("w", 2500))
	digest := reg.PushFiles(t, "models/detector:v9", map[string][]byte{"model.onnx": weights, "labels.txt": []byte("person\n")})
	var manifests atomic.Int64
	reg.Use(func(_ http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/manifests/") {
			manifests.Add(1)
		}
		return false
	})
	r := &render.Registry{Options: transport.Options{Insecure: []string{reg.Host}}, Sizes: true}
	m := manifest.Model{Name: "detector", Ref: reg.Ref("models/detector:v9")}

	res, err := r.Resolve(context.Background(), m)
	require.NoError(t, err)
	require.Equal(t, digest, res.Digest)
	require.Equal(t, "v9", res.Tag)
	size := printable.HumanBytes(int64(len(weights) + len("person\n")))
	require.Equal(t, reg.Ref("models/detector:v9")+" → "+digest+", "+size+" to download", res.Reason)
	asked := manifests.Load()
	require.Positive(t, asked)

	again, err := r.Resolve(context.Background(), m)
	require.NoError(t, err)
	require.Equal(t, res, again)
	require.Equal(t, asked, manifests.Load(), "a ref is asked once")

	_, err = r.Resolve(context.Background(), manifest.Model{Name: "x", Ref: reg.Ref("models/detector:v10")})
	require.ErrorIs(t, err, transport.ErrNotFound)

	// An include: what it selects is what pulling costs, and a pattern
	// that matches no file fails, listing the files.
	m.Include = []string{"*.txt"}
	res, err = r.Resolve(context.Background(), m)
	require.NoError(t, err)
	require.Equal(t, reg.Ref("models/detector:v9")+" → "+digest+", 7 B to download", res.Reason)
	m.Include = []string{"*.gguf"}
	_, err = r.Resolve(context.Background(), m)
	require.ErrorIs(t, err, modelkit.ErrIncludeMatchesNothing)
	require.ErrorContains(t, err, `include "*.gguf" matches no file of the model `+digest+"; it holds labels.txt, model.onnx")
	_, err = (&render.Registry{Options: r.Options}).Resolve(context.Background(), m)
	require.ErrorIs(t, err, modelkit.ErrIncludeMatchesNothing, "validate --resolve reads the manifest of a model with an include")
}
