package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

type entry struct {
	name, body, link string
	typ              byte
	mode             int64
}

func tarball(t *testing.T, compression string, entries ...entry) *bytes.Buffer {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Size: int64(len(e.body))}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		require.NoError(t, tw.WriteHeader(h))
		_, err := tw.Write([]byte(e.body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	var out bytes.Buffer
	switch compression {
	case Gzip:
		zw := gzip.NewWriter(&out)
		_, _ = zw.Write(raw.Bytes())
		require.NoError(t, zw.Close())
	case Zstd:
		zw, err := zstd.NewWriter(&out)
		require.NoError(t, err)
		_, _ = zw.Write(raw.Bytes())
		require.NoError(t, zw.Close())
	default:
		out = raw
	}
	return &out
}

func TestExtract(t *testing.T) {
	for _, c := range []string{Uncompressed, Gzip, Zstd} {
		t.Run("model folder "+c, func(t *testing.T) {
			dir := t.TempDir()
			err := Extract(tarball(t, c,
				entry{name: "model/", typ: tar.TypeDir, mode: 0o755},
				entry{name: "model/model.onnx", typ: tar.TypeReg, body: "weights"},
				entry{name: "model/run.sh", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o755},
				entry{name: "model/current.onnx", typ: tar.TypeSymlink, link: "model.onnx"},
				entry{name: "model/copy.onnx", typ: tar.TypeLink, link: "model/model.onnx"},
				entry{name: "./labels/names.txt", typ: tar.TypeReg, body: "person\n"},
			), c, dir)
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(dir, "model/current.onnx"))
			require.NoError(t, err)
			require.Equal(t, "weights", string(b))
			fi, err := os.Stat(filepath.Join(dir, "model/run.sh"))
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
			require.FileExists(t, filepath.Join(dir, "model/copy.onnx"))
			require.FileExists(t, filepath.Join(dir, "labels/names.txt"))
		})
	}

	hostile := []struct {
		name    string
		entries []entry
	}{
		{"dot-dot name", []entry{{name: "../evil", typ: tar.TypeReg, body: "x"}}},
		{"nested dot-dot name", []entry{{name: "a/../../evil", typ: tar.TypeReg, body: "x"}}},
		{"absolute name", []entry{{name: "/tmp/evil", typ: tar.TypeReg, body: "x"}}},
		{"symlink out", []entry{{name: "link", typ: tar.TypeSymlink, link: "../.."}}},
		{"absolute symlink", []entry{{name: "link", typ: tar.TypeSymlink, link: "/etc"}}},
		{"write through a planted symlink", []entry{
			{name: "sub", typ: tar.TypeDir}, {name: "sub/up", typ: tar.TypeSymlink, link: ".."},
			{name: "sub/up/up2", typ: tar.TypeSymlink, link: ".."}, {name: "sub/up/up2/evil", typ: tar.TypeReg, body: "x"}}},
		{"hard link out", []entry{{name: "h", typ: tar.TypeLink, link: "../../etc/passwd"}}},
		{"device node", []entry{{name: "null", typ: tar.TypeChar}}},
		{"fifo", []entry{{name: "fifo", typ: tar.TypeFifo}}},
		{"overwrite through duplicate", []entry{{name: "a", typ: tar.TypeSymlink, link: "b"}, {name: "a", typ: tar.TypeReg, body: "x"}}},
	}
	for _, tc := range hostile {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "a", "b", "dest")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			err := Extract(tarball(t, Uncompressed, tc.entries...), Uncompressed, dir)
			require.ErrorIs(t, err, ErrUnsafeArchive)
			// Nothing landed outside the folder.
			var outside []string
			require.NoError(t, filepath.WalkDir(parent, func(p string, d os.DirEntry, err error) error {
				if p != parent && !d.IsDir() && !bytes.HasPrefix([]byte(p), []byte(dir+"/")) {
					outside = append(outside, p)
				}
				return err
			}))
			require.Empty(t, outside)
		})
	}
}
