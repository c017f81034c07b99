package store

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
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
	e := putEntry(t, s, "", layer, true, extract.Gzip)
	dir := filepath.Join(t.TempDir(), "v")
	err := s.Materialise(context.Background(), &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{e}}, dir, 8<<20)
	require.ErrorIs(t, err, extract.ErrTooLarge)
	require.ErrorContains(t, err, "more than 8.4 MB written")
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "a failed version is removed")

	// Within its room it unpacks.
	ok := putEntry(t, s, "", bomb(t, 4<<20), true, extract.Gzip)
	require.NoError(t, s.Materialise(context.Background(), &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{ok}}, dir, 8<<20))
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
	e := putEntry(t, s, "", buf.Bytes(), true, extract.Gzip)
	dir := filepath.Join(t.TempDir(), "v")
	err := s.Materialise(context.Background(), &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{e}}, dir, 8<<20)
	require.ErrorIs(t, err, extract.ErrTooLarge, "5,000 empty files took nothing of an 8 MiB budget")
}

// No folder of a version is writable by others, whatever the tar says:
// nobody but tend may swap a model's files.
func TestUnpackedModesAreNormalised(t *testing.T) {
	s := newTestStore(t)
	layer := tarball(t, extract.Gzip,
		entry{name: "shared/", typ: tar.TypeDir, mode: 0o1777},
		entry{name: "group/", typ: tar.TypeDir, mode: 0o2775},
		entry{name: "shared/run", typ: tar.TypeReg, mode: 0o6777, body: "#!/bin/sh\n"},
	)
	e := putEntry(t, s, "", layer.Bytes(), true, extract.Gzip)
	dir := filepath.Join(t.TempDir(), "v")
	require.NoError(t, s.Materialise(context.Background(), &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{e}}, dir, 0))
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
