package oci

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"
)

// bomb is a tar+gzip layer of one file of n zero bytes: a few kB that
// unpack to n.
func bomb(t *testing.T, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	require.NoError(t, err)
	tw := tar.NewWriter(zw)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: n}))
	chunk := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(chunk)) {
		_, err := tw.Write(chunk[:min(int64(len(chunk)), left)])
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// A layer that unpacks past its room is stopped as it writes: the disk is
// never filled, whatever the compression ratio.
func TestUnpackIsBoundedAsItWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: a 256 MiB decompression bomb, made and unpacked (20 s under -race); make test runs it, -short skips it")
	}
	layer := bomb(t, 256<<20)
	require.Less(t, len(layer), 1<<20, "a bomb: small compressed")
	s := newTestStore(t)
	e := putEntry(t, s, "", layer, true, Gzip)
	dir := filepath.Join(t.TempDir(), "v")
	err := s.Materialise(context.Background(), &Artifact{Digest: testDigest, Entries: []Entry{e}}, dir, 8<<20)
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorContains(t, err, "more than 8.4 MB written")
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "a failed version is removed")

	// Within its room it unpacks.
	ok := putEntry(t, s, "", bomb(t, 4<<20), true, Gzip)
	require.NoError(t, s.Materialise(context.Background(), &Artifact{Digest: testDigest, Entries: []Entry{ok}}, dir, 8<<20))
}

// A small layer of many empty entries is bounded too: each entry costs a
// block of the budget, so it cannot use up the file system's inodes.
func TestUnpackCountsEntries(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for i := range 5000 {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("e%05d", i), Typeflag: tar.TypeReg, Mode: 0o644}))
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	require.Less(t, buf.Len(), 64<<10, "small compressed")
	s := newTestStore(t)
	e := putEntry(t, s, "", buf.Bytes(), true, Gzip)
	dir := filepath.Join(t.TempDir(), "v")
	err := s.Materialise(context.Background(), &Artifact{Digest: testDigest, Entries: []Entry{e}}, dir, 8<<20)
	require.ErrorIs(t, err, ErrTooLarge, "5,000 empty files took nothing of an 8 MiB budget")
}

// No folder of a version is writable by others, whatever the tar says:
// nobody but tend may swap a model's files.
func TestUnpackedModesAreNormalised(t *testing.T) {
	s := newTestStore(t)
	layer := tarball(t, Gzip,
		entry{name: "shared/", typ: tar.TypeDir, mode: 0o1777},
		entry{name: "group/", typ: tar.TypeDir, mode: 0o2775},
		entry{name: "shared/run", typ: tar.TypeReg, mode: 0o6777, body: "#!/bin/sh\n"},
	)
	e := putEntry(t, s, "", layer.Bytes(), true, Gzip)
	dir := filepath.Join(t.TempDir(), "v")
	require.NoError(t, s.Materialise(context.Background(), &Artifact{Digest: testDigest, Entries: []Entry{e}}, dir, 0))
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := os.Lstat(p)
		require.NoError(t, err)
		mode := fi.Mode()
		require.Zero(t, mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky), "%s is %s", p, mode)
		require.Zero(t, mode.Perm()&0o022, "%s is writable by others: %s", p, mode)
		return nil
	}))
}

// A manifest with more layers than a model has is refused at once, and
// the collision check takes time linear in the layers.
func TestLayerCountIsBounded(t *testing.T) {
	m := &v1.Manifest{Config: v1.Descriptor{MediaType: types.OCIConfigJSON}}
	for i := range MaxLayers + 1 {
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCILayer, Size: 1,
			Digest:      v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%064x", i)},
			Annotations: map[string]string{annotationTitle: fmt.Sprintf("f%d", i)}})
	}
	_, _, err := layout(testDigest, m)
	require.ErrorIs(t, err, ErrUnknownLayout)
	require.ErrorContains(t, err, fmt.Sprintf("has %d layers; tend reads at most %d", MaxLayers+1, MaxLayers))

	m.Layers = m.Layers[:MaxLayers]
	format, entries, err := layout(testDigest, m)
	require.NoError(t, err)
	require.Equal(t, FormatORAS, format)
	require.Len(t, entries, MaxLayers)
	require.NoError(t, checkEntries(&Artifact{Digest: testDigest, Entries: entries}))
}

func TestCheckEntriesCollisions(t *testing.T) {
	h := func(i int) v1.Hash { return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%064x", i)} }
	for _, tc := range []struct {
		name    string
		entries []Entry
		want    string
	}{
		{"same path", []Entry{{Digest: h(1), Path: "a/b"}, {Digest: h(2), Path: "a/b"}}, `path "a/b" collides with layer`},
		{"file where a folder is needed", []Entry{{Digest: h(1), Path: "a"}, {Digest: h(2), Path: "a/b/c"}},
			fmt.Sprintf(`path "a" is a file, and layer %s needs it as a folder for "a/b/c"`, h(2))},
		{"a tar folder may hold files", []Entry{{Digest: h(1), Path: "a", Unpack: true}, {Digest: h(2), Path: "a/b"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkEntries(&Artifact{Digest: testDigest, Entries: tc.entries})
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrUnsafeArchive)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// BenchmarkCheckEntries checks the paths of the most layers tend reads.
func BenchmarkCheckEntries(b *testing.B) {
	var entries []Entry
	for i := range MaxLayers {
		entries = append(entries, Entry{Digest: v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%064x", i)},
			Path: strings.Repeat("d/", i%8) + fmt.Sprintf("f%d", i)})
	}
	a := &Artifact{Digest: testDigest, Entries: entries}
	for b.Loop() {
		if err := checkEntries(a); err != nil {
			b.Fatal(err)
		}
	}
}
