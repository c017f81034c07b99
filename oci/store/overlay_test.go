package store

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	ggcrtarball "github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
)

// An image built in steps applies as crane export flattens it (ggcr's
// mutate.Extract, the reference): its layers in manifest order, a later
// one overwriting a file or replacing a folder by a file, whiteouts and
// an opaque whiteout deleting what lower layers wrote (never what the
// same layer wrote), hard links within the image.
func TestImageLayersApplyAsExported(t *testing.T) {
	layers := [][]entry{
		{
			file("labels.txt", "labels v1\n"),
			file("notes.txt", "notes\n"),
			{name: "dir/", typ: tar.TypeDir, mode: 0o755},
			file("dir/a", "a\n"),
			file("dir/b", "b\n"),
			file("keep.txt", "kept\n"),
			{name: "sub/", typ: tar.TypeDir, mode: 0o755},
			file("sub/x", "x\n"),
			file("gone/y", "y\n"),
		},
		{
			file("labels.txt", "labels v2\n"),
			{name: ".wh.notes.txt", typ: tar.TypeReg},
			{name: "dir/.wh..wh..opq", typ: tar.TypeReg},
			file("dir/c", "c\n"),
			file("sub", "now a file\n"),
			{name: ".wh.gone", typ: tar.TypeReg},
			file("fresh.txt", "fresh\n"),
			{name: ".wh.fresh.txt", typ: tar.TypeReg}, // hides only what lower layers wrote
		},
		{
			{name: "hl", typ: tar.TypeLink, link: "labels.txt"},
			{name: ".wh.nothing-here", typ: tar.TypeReg},
			{name: "missing/.wh.z", typ: tar.TypeReg},
			{name: "labels.txt/.wh.z", typ: tar.TypeReg},
		},
	}
	img := empty.Image
	for _, l := range layers {
		data := tgz(t, extract.Gzip, l...)
		layer, err := ggcrtarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		require.NoError(t, err)
		img, err = mutate.AppendLayers(img, layer)
		require.NoError(t, err)
	}
	want := exported(t, mutate.Extract(img))

	s := newTestStore(t)
	m, err := img.Manifest()
	require.NoError(t, err)
	d, err := img.Digest()
	require.NoError(t, err)
	raw, err := img.RawManifest()
	require.NoError(t, err)
	a, err := modelkit.Load(func(v1.Hash, string) ([]byte, error) { return raw, nil }, d, modelkit.NodePlatform())
	require.NoError(t, err)
	format, entries := a.Format, a.Entries
	require.Equal(t, modelkit.FormatTar, format)
	for i, desc := range m.Layers {
		require.Equal(t, desc.Digest, entries[i].Digest, "layer %d in manifest order", i)
		l, err := img.LayerByDigest(desc.Digest)
		require.NoError(t, err)
		rc, err := l.Compressed()
		require.NoError(t, err)
		data, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, s.Put(desc.Digest, data))
	}
	dir := filepath.Join(t.TempDir(), "v")
	require.NoError(t, s.Materialise(context.Background(), &modelkit.Artifact{Digest: d, Format: format, Entries: entries}, dir, 0))
	require.Equal(t, want, onDisk(t, dir))
	require.Equal(t, "labels v2\n", want["labels.txt"], "the reference agrees with the layer spec")
}

// exported reads a flattened image's tar into path → content ("/" for a
// folder).
func exported(t *testing.T, rc io.ReadCloser) map[string]string {
	t.Helper()
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	links := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		switch h.Typeflag {
		case tar.TypeDir:
			out[name] = "/"
		case tar.TypeLink:
			links[name] = strings.TrimPrefix(h.Linkname, "./")
		default:
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			out[name] = string(b)
		}
	}
	for name, target := range links {
		out[name] = out[target]
	}
	return out
}

// onDisk reads a folder into path → content ("/" for a folder).
func onDisk(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == ".":
		case e.IsDir():
			out[filepath.ToSlash(rel)] = "/"
		default:
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	}))
	return out
}
