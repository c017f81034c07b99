package store

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
)

// putEntry stores data in s and returns an entry for it at path p.
func putEntry(t *testing.T, s *Store, p string, data []byte, unpack bool, compression string) modelkit.Entry {
	t.Helper()
	d, size, err := v1.SHA256(bytes.NewReader(data))
	require.NoError(t, err)
	require.NoError(t, s.Put(d, data))
	return modelkit.Entry{Digest: d, Size: size, MediaType: "application/octet-stream", Path: p, Unpack: unpack, Compression: compression}
}

var testDigest = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("d", 64)}

func newTestStore(t *testing.T) *Store {
	s, err := NewStore(t.TempDir(), nil)
	require.NoError(t, err)
	return s
}

// outside lists the files under parent that are not under dir.
func outside(t *testing.T, parent, dir string) []string {
	var out []string
	require.NoError(t, filepath.WalkDir(parent, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			out = append(out, p)
		}
		return err
	}))
	return out
}

func TestMaterialiseHardLinks(t *testing.T) {
	s := newTestStore(t)
	e := putEntry(t, s, "models/model.onnx", []byte("weights"), false, "")
	// A blob fetched under umask 077: linking makes it readable by all, as
	// a service running as another user reads it, and by no one writable.
	require.NoError(t, os.Chmod(s.Path(e.Digest), 0o600))
	dir := filepath.Join(t.TempDir(), "detector", e.Digest.Hex)
	require.NoError(t, s.Materialise(context.Background(), &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{e}}, dir, 0))

	got, err := os.Stat(filepath.Join(dir, "models/model.onnx"))
	require.NoError(t, err)
	blob, err := os.Stat(s.Path(e.Digest))
	require.NoError(t, err)
	require.True(t, os.SameFile(got, blob), "the file is the blob's inode")
	require.Equal(t, os.FileMode(0o444), got.Mode().Perm())
	require.Equal(t, os.FileMode(0o444), blob.Mode().Perm())
}

func TestMaterialiseCopiesWhenLinkFails(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EXDEV, syscall.EPERM, syscall.EMLINK} {
		t.Run(errno.Error(), func(t *testing.T) {
			s := newTestStore(t)
			e := putEntry(t, s, "model.onnx", []byte("weights"), false, "")
			linked := 0
			link = func(oldname, newname string) error {
				linked++
				return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: errno}
			}
			t.Cleanup(func() { link = os.Link })
			dir := filepath.Join(t.TempDir(), "v")
			require.NoError(t, s.Materialise(context.Background(), &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{e}}, dir, 0))
			require.Equal(t, 1, linked)

			got, err := os.Stat(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			blob, err := os.Stat(s.Path(e.Digest))
			require.NoError(t, err)
			require.False(t, os.SameFile(got, blob), "a copy, not a link")
			require.Equal(t, os.FileMode(0o444), got.Mode().Perm())
			b, err := os.ReadFile(filepath.Join(dir, "model.onnx"))
			require.NoError(t, err)
			require.Equal(t, "weights", string(b))
		})
	}
}

func TestMaterialiseUnpacks(t *testing.T) {
	s := newTestStore(t)
	a := &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{
		putEntry(t, s, "", tgz(t, extract.Zstd,
			entry{name: "bin/", typ: tar.TypeDir, mode: 0o755},
			entry{name: "bin/run.sh", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o755},
			entry{name: "current.onnx", typ: tar.TypeSymlink, link: "models/model.onnx"},
		), true, extract.Zstd),
		putEntry(t, s, "models", tgz(t, extract.Gzip,
			entry{name: "models", typ: tar.TypeDir, mode: 0o755},
			file("models/model.onnx", "weights"),
			entry{name: "./models/labels/names.txt", typ: tar.TypeReg, body: "person\n", mode: 0o664},
		), true, extract.Gzip),
		putEntry(t, s, "README.md", []byte("# detector\n"), false, ""),
	}}
	dir := filepath.Join(t.TempDir(), "v")
	require.NoError(t, s.Materialise(context.Background(), a, dir, 0))

	for p, want := range map[string]string{"current.onnx": "weights", "models/labels/names.txt": "person\n", "README.md": "# detector\n", "bin/run.sh": "#!/bin/sh\n"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		require.NoError(t, err, p)
		require.Equal(t, want, string(b), p)
	}
	for p, mode := range map[string]os.FileMode{"bin/run.sh": 0o555, "models/labels/names.txt": 0o444, "models/model.onnx": 0o444} {
		fi, err := os.Stat(filepath.Join(dir, p))
		require.NoError(t, err)
		require.Equal(t, mode, fi.Mode().Perm(), "%s: write bits taken off, execute bits kept", p)
	}
	require.NoDirExists(t, filepath.Join(dir, "models/models"), "ORAS's folder prefix is taken off")
}

func TestMaterialiseRefuses(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		entries func(s *Store) []modelkit.Entry
		is      error
		want    []string
	}{
		{
			name: "a title with ..",
			entries: func(s *Store) []modelkit.Entry {
				return []modelkit.Entry{putEntry(t, s, "../../evil", []byte("x"), false, "")}
			},
			is: extract.ErrUnsafeArchive, want: []string{`"../../evil"`, "climbs out"},
		},
		{
			name: "a title with .. inside",
			entries: func(s *Store) []modelkit.Entry {
				return []modelkit.Entry{putEntry(t, s, "a/../../evil", []byte("x"), false, "")}
			},
			is: extract.ErrUnsafeArchive, want: []string{`"a/../../evil"`},
		},
		{
			name: "an absolute title",
			entries: func(s *Store) []modelkit.Entry {
				return []modelkit.Entry{putEntry(t, s, "/tmp/evil", []byte("x"), false, "")}
			},
			is: extract.ErrUnsafeArchive, want: []string{"absolute"},
		},
		{
			name: "a title that is not clean",
			entries: func(s *Store) []modelkit.Entry {
				return []modelkit.Entry{putEntry(t, s, "./a//b", []byte("x"), false, "")}
			},
			is: extract.ErrUnsafeArchive, want: []string{"not a clean path"},
		},
		{
			name:    "a file without a name",
			entries: func(s *Store) []modelkit.Entry { return []modelkit.Entry{putEntry(t, s, "", []byte("x"), false, "")} },
			is:      extract.ErrUnsafeArchive, want: []string{"a file needs a name"},
		},
		{
			name: "two entries with the same path",
			entries: func(s *Store) []modelkit.Entry {
				return []modelkit.Entry{putEntry(t, s, "model.onnx", []byte("a"), false, ""), putEntry(t, s, "model.onnx", []byte("b"), false, "")}
			},
			is: extract.ErrUnsafeArchive, want: []string{`"model.onnx" collides with layer sha256:`},
		},
		{
			name: "a file where another entry needs a folder",
			entries: func(s *Store) []modelkit.Entry {
				return []modelkit.Entry{putEntry(t, s, "models", []byte("a"), false, ""), putEntry(t, s, "models/x.onnx", []byte("b"), false, "")}
			},
			is: extract.ErrUnsafeArchive, want: []string{`"models" is a file`},
		},
		{
			name: "an ORAS folder holding names outside it",
			entries: func(s *Store) []modelkit.Entry {
				return []modelkit.Entry{putEntry(t, s, "models", tgz(t, extract.Gzip, file("models/a", "a"), file("other/b", "b")), true, extract.Gzip)}
			},
			is: extract.ErrUnsafeArchive, want: []string{`other/b: not inside the layer's folder "models"`},
		},
		{
			name: "an ORAS folder that is a file",
			entries: func(s *Store) []modelkit.Entry {
				return []modelkit.Entry{putEntry(t, s, "models", tgz(t, extract.Gzip, file("models", "a")), true, extract.Gzip)}
			},
			is: extract.ErrUnsafeArchive, want: []string{`models: not inside the layer's folder "models"`},
		},
		{
			name: "a tar layer overwriting a file entry",
			entries: func(s *Store) []modelkit.Entry {
				return []modelkit.Entry{putEntry(t, s, "model.onnx", []byte("a"), false, ""), putEntry(t, s, "", tgz(t, extract.Uncompressed, file("model.onnx", "b")), true, "")}
			},
			is: extract.ErrUnsafeArchive, want: []string{"model.onnx"},
		},
		{
			name: "a later tar layer overwriting an earlier one",
			entries: func(s *Store) []modelkit.Entry {
				return []modelkit.Entry{
					putEntry(t, s, "", tgz(t, extract.Uncompressed, file("model.onnx", "a")), true, ""),
					putEntry(t, s, "", tgz(t, extract.Gzip, file("model.onnx", "b")), true, extract.Gzip),
				}
			},
			is: extract.ErrUnsafeArchive, want: []string{"model.onnx"},
		},
		{
			name: "a symlink planted through a symlinked folder",
			entries: func(s *Store) []modelkit.Entry {
				return []modelkit.Entry{putEntry(t, s, "", tgz(t, extract.Uncompressed,
					entry{name: "d/", typ: tar.TypeDir, mode: 0o755},
					entry{name: "d/b", typ: tar.TypeSymlink, link: ".."},
					entry{name: "d/b/e", typ: tar.TypeSymlink, link: ".."},
				), true, "")}
			},
			is: extract.ErrUnsafeArchive, want: []string{"symlink e"},
		},
		{
			name: "a missing blob",
			entries: func(s *Store) []modelkit.Entry {
				e := putEntry(t, s, "model.onnx", []byte("weights"), false, "")
				require.NoError(t, os.Remove(s.Path(e.Digest)))
				return []modelkit.Entry{e}
			},
			is: ErrNotStored, want: []string{"sha256:"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t)
			parent := filepath.Join(t.TempDir(), "a", "b")
			dir := filepath.Join(parent, "v")
			err := s.Materialise(ctx, &modelkit.Artifact{Digest: testDigest, Entries: tt.entries(s)}, dir, 0)
			require.ErrorIs(t, err, tt.is)
			require.ErrorContains(t, err, testDigest.String(), "the error names the manifest")
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
			require.NoDirExists(t, dir, "a failed version folder is removed")
			require.Empty(t, outside(t, filepath.Dir(filepath.Dir(parent)), dir), "nothing is written outside the version folder")
		})
	}

	t.Run("an existing folder", func(t *testing.T) {
		s := newTestStore(t)
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o644))
		err := s.Materialise(ctx, &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{putEntry(t, s, "m", []byte("m"), false, "")}}, dir, 0)
		require.ErrorIs(t, err, os.ErrExist)
		require.FileExists(t, filepath.Join(dir, "keep"), "a folder Materialise did not make is left alone")
	})

	t.Run("a cancelled context", func(t *testing.T) {
		s := newTestStore(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		dir := filepath.Join(t.TempDir(), "v")
		err := s.Materialise(cctx, &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{putEntry(t, s, "m", []byte("m"), false, "")}}, dir, 0)
		require.ErrorIs(t, err, context.Canceled)
		require.NoDirExists(t, dir)
	})
}
