package model_test

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// A model whose image layer holds an absolute symlink and a fifo, as
// crane appends a tar of a folder: the symlink is kept as it is, the fifo
// skipped with one warning naming it (the log when the version is built;
// the status, through the observed state's note, while it runs), and the
// next tick changes nothing.
func TestModelKeepsLinksAndNamesSkippedSpecialFiles(t *testing.T) {
	n := newModelNode(t)
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range []*tar.Header{
		{Name: "model.onnx", Typeflag: tar.TypeReg, Mode: 0o644, Size: 7},
		{Name: "hostname", Typeflag: tar.TypeSymlink, Linkname: "/etc/hostname"},
		{Name: "run/ctl", Typeflag: tar.TypeFifo, Mode: 0o600},
	} {
		require.NoError(t, tw.WriteHeader(h))
		if h.Size > 0 {
			_, err := tw.Write([]byte("weights"))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	_, err := testoci.Push(n.reg.Host, "models/links:v1", "application/vnd.oci.image.config.v1+json", []byte("{}"),
		[]testoci.Layer{{MediaType: "application/vnd.oci.image.layer.v1.tar", Data: b.Bytes()}})
	require.NoError(t, err)
	m := n.model("links", "models/links:v1")
	n.apply(m)
	require.Equal(t, "weights", n.read("links", "model.onnx"))
	target, err := os.Readlink(filepath.Join(n.Path(modelAllow), "links", "hostname"))
	require.NoError(t, err)
	require.Equal(t, "/etc/hostname", target)
	require.NoDirExists(t, filepath.Join(n.Path(modelAllow), "links", "run", "ctl"))
	require.Contains(t, n.Logs.String(), `"skipped":"left out 1 special file(s) tend does not write: fifo run/ctl"`)

	tk, err := n.Plan(n.declare(m), "rev")
	require.NoError(t, err)
	require.True(t, tk.Plan.Empty(), reasons(tk.Plan))
	require.Equal(t, "left out 1 special file(s) tend does not write: fifo run/ctl", tk.Observed.Resources["model/links"].Note)
}
