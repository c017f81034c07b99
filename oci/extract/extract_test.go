package extract

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
		if e.typ == tar.TypeXGlobalHeader { // as git archive writes one
			h = &tar.Header{Typeflag: e.typ, PAXRecords: map[string]string{"comment": "0123abcd"}}
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
			err := Extract(context.Background(), tarball(t, c,
				entry{name: "model/", typ: tar.TypeDir, mode: 0o755},
				entry{name: "model/model.onnx", typ: tar.TypeReg, body: "weights"},
				entry{name: "model/run.sh", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o755},
				entry{name: "model/current.onnx", typ: tar.TypeSymlink, link: "model.onnx"},
				entry{name: "model/copy.onnx", typ: tar.TypeLink, link: "model/model.onnx"},
				entry{name: "./labels/names.txt", typ: tar.TypeReg, body: "person\n"},
			), c, dir, nil)
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
		{"symlink through a planted folder link", []entry{
			{name: "d", typ: tar.TypeDir}, {name: "d/b", typ: tar.TypeSymlink, link: ".."},
			{name: "d/b/e", typ: tar.TypeSymlink, link: ".."}}},
		{"file through a planted folder link", []entry{
			{name: "d", typ: tar.TypeDir}, {name: "d/b", typ: tar.TypeSymlink, link: ".."},
			{name: "d/b/x", typ: tar.TypeReg, body: "x"}}},
		{"folder through a planted folder link", []entry{
			{name: "d/b", typ: tar.TypeSymlink, link: ".."}, {name: "d/b/sub/", typ: tar.TypeDir}}},
		{"folder entry over a planted link", []entry{
			{name: "d/b", typ: tar.TypeSymlink, link: ".."}, {name: "d/b/", typ: tar.TypeDir}}},
		{"link target climbing after a planted link", []entry{
			{name: "sub", typ: tar.TypeDir}, {name: "sub/up", typ: tar.TypeSymlink, link: ".."},
			{name: "x", typ: tar.TypeSymlink, link: "sub/up/.."}}},
		{"link target climbing after a link planted later", []entry{
			{name: "x", typ: tar.TypeSymlink, link: "sub/up/.."},
			{name: "sub", typ: tar.TypeDir}, {name: "sub/up", typ: tar.TypeSymlink, link: ".."}}},
		{"symlink to the folder's parent", []entry{{name: "link", typ: tar.TypeSymlink, link: ".."}}},
		{"deep symlink climbing one too many", []entry{{name: "a/b/link", typ: tar.TypeSymlink, link: "../../../x"}}},
		{"hard link to a confined symlink", []entry{
			{name: "sub", typ: tar.TypeDir}, {name: "sub/l", typ: tar.TypeSymlink, link: ".."},
			{name: "l2", typ: tar.TypeLink, link: "sub/l"}}},
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
			err := Extract(context.Background(), tarball(t, Uncompressed, tc.entries...), Uncompressed, dir, nil)
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
			require.Empty(t, linksOut(t, dir), "no symlink left in the folder points out of it")
		})
	}
}

func TestExtractSaysWhereALinkedEntryWouldLand(t *testing.T) {
	dir := t.TempDir()
	err := Extract(context.Background(), tarball(t, Uncompressed,
		entry{name: "d/b", typ: tar.TypeSymlink, link: ".."},
		entry{name: "d/b/e", typ: tar.TypeSymlink, link: ".."},
	), Uncompressed, dir, nil)
	require.ErrorIs(t, err, ErrUnsafeArchive)
	require.ErrorContains(t, err, `d/b/e: parent "d/b" is a symlink to "..", so this would plant symlink e`)
	_, err = os.Lstat(filepath.Join(dir, "e"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestExtractKeepsRelativeLinksInside(t *testing.T) {
	dir := t.TempDir()
	err := Extract(context.Background(), tarball(t, Gzip,
		entry{name: "pax_global_header", typ: tar.TypeXGlobalHeader},
		entry{name: "model/model.onnx", typ: tar.TypeReg, body: "weights"},
		entry{name: "model/current.onnx", typ: tar.TypeSymlink, link: "model.onnx"},
		entry{name: "model/dot.onnx", typ: tar.TypeSymlink, link: "./model.onnx"},
		entry{name: "labels/weights", typ: tar.TypeSymlink, link: "../model/model.onnx"},
		entry{name: "a/b/c/weights", typ: tar.TypeSymlink, link: "../../../model//model.onnx"},
		entry{name: "latest", typ: tar.TypeSymlink, link: "model"},
		entry{name: "self", typ: tar.TypeSymlink, link: "."},
		entry{name: "via", typ: tar.TypeSymlink, link: "latest/current.onnx"},
		entry{name: "later", typ: tar.TypeSymlink, link: "extra/file"},
		entry{name: "extra/file", typ: tar.TypeReg, body: "extra"},
		entry{name: "dangling", typ: tar.TypeSymlink, link: "missing.txt"},
		entry{name: "labels/copy", typ: tar.TypeLink, link: "model/model.onnx"},
	), Gzip, dir, nil)
	require.NoError(t, err)
	for p, want := range map[string]string{
		"model/current.onnx": "weights", "model/dot.onnx": "weights", "labels/weights": "weights",
		"a/b/c/weights": "weights", "latest/model.onnx": "weights", "self/model/model.onnx": "weights",
		"via": "weights", "later": "extra", "labels/copy": "weights",
	} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		require.NoError(t, err, p)
		require.Equal(t, want, string(b), p)
	}
	require.NoFileExists(t, filepath.Join(dir, "pax_global_header"))
	require.Empty(t, linksOut(t, dir))
}

// linksOut lists the symlinks under dir that resolve (or, dangling, point)
// outside it.
func linksOut(t *testing.T, dir string) []string {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	inside := func(p string) bool { return p == real || strings.HasPrefix(p, real+string(filepath.Separator)) }
	var out []string
	require.NoError(t, filepath.WalkDir(real, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeSymlink == 0 {
			return err
		}
		to, err := filepath.EvalSymlinks(p)
		if err != nil { // dangling: judge where it points, from where it sits
			target, rerr := os.Readlink(p)
			require.NoError(t, rerr)
			to = filepath.Join(filepath.Dir(p), target)
			if filepath.IsAbs(target) {
				to = target
			}
		}
		if !inside(to) {
			out = append(out, p+" -> "+to)
		}
		return nil
	}))
	return out
}

// TestExtractBoundsNames: a deep or long name is refused before any folder
// is made for it (the kernel would refuse it later, after the walk of
// every folder above it), while a tree at the depth bound unpacks.
func TestExtractBoundsNames(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("d/", n) + "f" }
	tests := []struct {
		name, entry, want string
	}{
		{"too deep", deep(maxNameParts), fmt.Sprintf("is %d folders deep; names are at most %d deep", maxNameParts, maxNameParts-1)},
		{"too long", strings.Repeat("n", maxNameBytes+1), fmt.Sprintf("a name of %d bytes", maxNameBytes+1)},
		{"a part too long", "a/" + strings.Repeat("p", maxPartBytes+1), fmt.Sprintf("has a part of %d bytes", maxPartBytes+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			err := Extract(context.Background(), tarball(t, Uncompressed, entry{name: tt.entry, typ: tar.TypeReg, body: "x"}), Uncompressed, dir, nil)
			require.ErrorIs(t, err, ErrUnsafeArchive)
			require.ErrorContains(t, err, tt.want)
			left, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, left, "nothing is made for a refused name")
		})
	}
	t.Run("at the bound", func(t *testing.T) {
		dir := t.TempDir()
		var entries []entry
		for i := range 50 {
			entries = append(entries, entry{name: deep(maxNameParts-2) + "/" + strconv.Itoa(i), typ: tar.TypeReg, body: "x"})
		}
		require.NoError(t, Extract(context.Background(), tarball(t, Uncompressed, entries...), Uncompressed, dir, nil))
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(deep(maxNameParts-2)), "49"))
		require.NoError(t, err)
		require.Equal(t, "x", string(data))
	})
}

// TestExtractChargesImplicitFolders: folders a tar does not list but its
// names need are made, and each costs the budget as an entry does, so
// files in fresh folder chains cannot fill a file system's inodes while
// the budget counts their few bytes.
func TestExtractChargesImplicitFolders(t *testing.T) {
	var entries []entry
	for i := range 200 {
		entries = append(entries, entry{name: fmt.Sprintf("c%03d/a/b/c/d/f", i), typ: tar.TypeReg, body: "x"})
	}
	// The entries alone cost 200 × 4 KiB; with their 1,000 folders, 6 times that.
	b := &Budget{Limit: 2 * 200 * EntryCost}
	err := Extract(context.Background(), tarball(t, Uncompressed, entries...), Uncompressed, t.TempDir(), b)
	require.ErrorIs(t, err, ErrTooLarge)

	b = &Budget{Limit: 7 * 200 * EntryCost}
	require.NoError(t, Extract(context.Background(), tarball(t, Uncompressed, entries...), Uncompressed, t.TempDir(), b))
	require.Equal(t, int64(6*200*EntryCost+200), b.Written, "each entry, each folder made for it, each byte")
}

// TestExtractStopsWithItsContext: a tick's timeout or a shutdown ends an
// unpack between entries.
func TestExtractStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	err := Extract(ctx, tarball(t, Uncompressed, entry{name: "a", typ: tar.TypeReg, body: "x"}), Uncompressed, dir, nil)
	require.ErrorIs(t, err, context.Canceled)
	_, err = os.Stat(filepath.Join(dir, "a"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
