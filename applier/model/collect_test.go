package model_test

import (
	"archive/tar"
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// A file a later layer deletes is collected from the store once the
// version is built; a version that needs it again (the tag moved to the
// image without the whiteout) downloads its layer again in the same
// tick, and the tick after changes nothing.
func TestModelDownloadsALayerWhoseFileWasCollected(t *testing.T) {
	n := newModelNode(t)
	layer := func(name, body string) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}))
		_, err := tw.Write([]byte(body))
		require.NoError(t, err)
		require.NoError(t, tw.Close())
		return b.Bytes()
	}
	base := layer("huge.bin", strings.Repeat("w", 1<<20))
	whiteout := layer(".wh.huge.bin", "")
	push := func(layers ...[]byte) {
		var ls []testoci.Layer
		for _, l := range layers {
			ls = append(ls, testoci.Layer{MediaType: "application/vnd.oci.image.layer.v1.tar", Data: l})
		}
		_, err := testoci.Push(n.reg.Host, "models/m:latest", "application/vnd.oci.image.config.v1+json", []byte("{}"), ls)
		require.NoError(t, err)
	}
	push(base, layer("labels.txt", "person\n"), whiteout)
	gets := countBlobGets(t, n)
	m := n.model("m", "models/m:latest")
	n.apply(m)
	require.Equal(t, []string{"labels.txt"}, n.folder("m"))

	push(base)
	n.apply(m)
	require.Equal(t, []string{"huge.bin"}, n.folder("m"))
	require.Equal(t, strings.Repeat("w", 1<<20), n.read("m", "huge.bin"))
	require.Equal(t, []int{2}, gets.of(base), "downloaded again for the file collected")
	cs, _ := n.apply(m)
	require.True(t, cs.Empty(), reasons(cs))
}
