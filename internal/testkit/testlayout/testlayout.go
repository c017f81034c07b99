package testlayout

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"
)

// Read unpacks the OCI layout archive at path (folders and regular files
// only, each inside the folder) into a folder and returns the one image
// index its index.json names, that name
// (org.opencontainers.image.ref.name) and the folder.
func Read(t testing.TB, path string) (v1.ImageIndex, string, string) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		dst := filepath.Join(dir, filepath.FromSlash(h.Name))
		require.True(t, strings.HasPrefix(dst, dir+string(filepath.Separator)), "%s is outside the layout", h.Name)
		if h.Typeflag == tar.TypeDir {
			require.NoError(t, os.MkdirAll(dst, 0o755))
			continue
		}
		require.Equal(t, byte(tar.TypeReg), h.Typeflag, h.Name)
		w, err := os.Create(dst)
		require.NoError(t, err)
		_, err = io.Copy(w, tr)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	lp, err := layout.FromPath(dir)
	require.NoError(t, err)
	top, err := lp.ImageIndex()
	require.NoError(t, err)
	im, err := top.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 1, "index.json names one index")
	desc := im.Manifests[0]
	require.Equal(t, types.OCIImageIndex, desc.MediaType)
	idx, err := top.ImageIndex(desc.Digest)
	require.NoError(t, err)
	return idx, desc.Annotations["org.opencontainers.image.ref.name"], dir
}
