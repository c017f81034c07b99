package store

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
)

// A tar layer in the store becomes its tree: a file per regular entry,
// read-only, and a record of every entry; the blob goes. The version
// folder hard-links its files from the tree, recreates folders, symlinks
// and the tar's hard links, and a second version shares the tree's files.
func TestUnpackKeepsOneCopy(t *testing.T) {
	s := newTestStore(t)
	e := putEntry(t, s, "", tgz(t, extract.Gzip,
		entry{name: "models/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "models/m.onnx", typ: tar.TypeReg, body: "weights", mode: 0o644},
		entry{name: "bin/run", typ: tar.TypeReg, body: "#!/bin/sh\n", mode: 0o755},
		entry{name: "latest", typ: tar.TypeSymlink, link: "models/m.onnx"},
		entry{name: "models/same.onnx", typ: tar.TypeLink, link: "models/m.onnx"},
		entry{name: ".wh.gone", typ: tar.TypeReg},
	), true, extract.Gzip)
	require.NoError(t, s.Unpack(context.Background(), e, nil, false))
	require.True(t, s.HasTree(e.Digest))
	require.True(t, s.Has(e.Digest))
	require.False(t, s.HasBlob(e.Digest), "the blob is kept beside its tree")
	rec, err := s.readTree(e.Digest)
	require.NoError(t, err)
	var types []string
	for _, te := range rec.Entries {
		types = append(types, te.Type)
	}
	require.Equal(t, []string{treeDir, treeFile, treeFile, treeSymlink, treeHardlink, treeWhiteout}, types)
	fi, err := os.Stat(s.tree(e.Digest).File(rec.Entries[2].File))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o555), fi.Mode().Perm(), "a tree's file is read-only")

	a := &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{e}}
	dirs := []string{filepath.Join(t.TempDir(), "v1"), filepath.Join(t.TempDir(), "v2")}
	for _, dir := range dirs {
		require.NoError(t, s.Materialise(context.Background(), a, dir, 0))
		b, err := os.ReadFile(filepath.Join(dir, "latest"))
		require.NoError(t, err)
		require.Equal(t, "weights", string(b))
		target, err := os.Readlink(filepath.Join(dir, "latest"))
		require.NoError(t, err)
		require.Equal(t, "models/m.onnx", target)
		b, err = os.ReadFile(filepath.Join(dir, ".wh.gone"))
		require.NoError(t, err, "not an image's layer: a whiteout's name is a file")
		require.Empty(t, b)
	}
	m1, err := os.Stat(filepath.Join(dirs[0], "models", "m.onnx"))
	require.NoError(t, err)
	m2, err := os.Stat(filepath.Join(dirs[1], "models", "m.onnx"))
	require.NoError(t, err)
	same, err := os.Stat(filepath.Join(dirs[1], "models", "same.onnx"))
	require.NoError(t, err)
	tree, err := os.Stat(s.tree(e.Digest).File(rec.Entries[1].File))
	require.NoError(t, err)
	require.True(t, os.SameFile(m1, tree) && os.SameFile(m2, tree) && os.SameFile(same, tree), "the versions' files are not the tree's")
}

// Across file systems, where a hard link fails, the version folder gets
// copies: counted against its budget.
func TestMaterialiseTreeCopiesWhereLinksFail(t *testing.T) {
	link = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EXDEV} }
	t.Cleanup(func() { link = os.Link })
	s := newTestStore(t)
	e := putEntry(t, s, "", tgz(t, extract.Uncompressed, file("m.onnx", "weights")), true, extract.Uncompressed)
	a := &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{e}}
	dir := filepath.Join(t.TempDir(), "v")
	require.NoError(t, s.Materialise(context.Background(), a, dir, 0))
	b, err := os.ReadFile(filepath.Join(dir, "m.onnx"))
	require.NoError(t, err)
	require.Equal(t, "weights", string(b))
	fi, err := os.Stat(filepath.Join(dir, "m.onnx"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o444), fi.Mode().Perm())

	// A tree's file changed in place is not copied: the tree is dropped.
	rec, err := s.readTree(e.Digest)
	require.NoError(t, err)
	p := s.tree(e.Digest).File(rec.Entries[0].File)
	require.NoError(t, os.Chmod(p, 0o644))
	require.NoError(t, os.WriteFile(p, []byte("WEIGHTS"), 0o644))
	require.NoError(t, os.Chmod(p, 0o444))
	dir = filepath.Join(t.TempDir(), "v")
	err = s.Materialise(context.Background(), a, dir, 0)
	require.ErrorIs(t, err, transport.ErrDigestMismatch)
	require.ErrorContains(t, err, "m.onnx")
	require.False(t, s.Has(e.Digest), "the changed tree is kept")
	require.NoDirExists(t, dir)
}

// A tree whose file was changed in place (through a version folder's hard
// link) no longer verifies: it is dropped, so the layer is fetched again.
// An intact tree verifies.
func TestVerifyDropsAChangedTree(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, p string)
		want   string
	}{
		{"content", func(t *testing.T, p string) {
			require.NoError(t, os.Chmod(p, 0o644))
			require.NoError(t, os.WriteFile(p, []byte("WEIGHTS"), 0o644))
			require.NoError(t, os.Chmod(p, 0o444))
		}, "now hashes to sha256:"},
		{"mode", func(t *testing.T, p string) { require.NoError(t, os.Chmod(p, 0o755)) }, "has mode 0755, not 0444"},
		{"removed", func(t *testing.T, p string) { require.NoError(t, os.Remove(p)) }, "is missing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t)
			e := putEntry(t, s, "", tgz(t, extract.Gzip, file("m.onnx", "weights")), true, extract.Gzip)
			require.NoError(t, s.Unpack(context.Background(), e, nil, false))
			require.NoError(t, s.Verify(e.Digest))
			require.True(t, s.HasTree(e.Digest))
			rec, err := s.readTree(e.Digest)
			require.NoError(t, err)
			tt.change(t, s.tree(e.Digest).File(rec.Entries[0].File))
			err = s.Verify(e.Digest)
			require.ErrorIs(t, err, transport.ErrDigestMismatch)
			require.ErrorContains(t, err, "m.onnx")
			require.ErrorContains(t, err, tt.want)
			require.ErrorContains(t, err, e.Digest.String())
			require.False(t, s.Has(e.Digest), "the changed tree is kept")
			require.Empty(t, entries(t, s.dir.TreePartials()), "the dropped tree is left behind")
		})
	}
}

// A layer unpacking past its budget leaves no tree and keeps its blob.
func TestUnpackBudget(t *testing.T) {
	s := newTestStore(t)
	e := putEntry(t, s, "", tgz(t, extract.Gzip, file("big", string(make([]byte, 64<<10)))), true, extract.Gzip)
	err := s.Unpack(context.Background(), e, &extract.Budget{Limit: 16 << 10}, false)
	require.ErrorIs(t, err, extract.ErrTooLarge)
	require.ErrorContains(t, err, e.Digest.String())
	require.False(t, s.HasTree(e.Digest))
	require.True(t, s.HasBlob(e.Digest))
	require.Empty(t, entries(t, s.dir.TreePartials()))
}

// GC removes trees nothing keeps, a blob left beside its complete tree,
// and a tree left half built by a crash.
func TestGCTrees(t *testing.T) {
	s := newTestStore(t)
	kept := putEntry(t, s, "", tgz(t, extract.Gzip, file("a", "a")), true, extract.Gzip)
	gone := putEntry(t, s, "", tgz(t, extract.Gzip, file("b", "bb")), true, extract.Gzip)
	crashed := putEntry(t, s, "", tgz(t, extract.Gzip, file("c", "ccc")), true, extract.Gzip)
	require.NoError(t, s.Unpack(context.Background(), kept, nil, true)) // as a crash before the blob went
	require.NoError(t, s.Unpack(context.Background(), gone, nil, false))
	require.NoError(t, os.MkdirAll(s.dir.TreePartial(crashed.Digest.Algorithm, crashed.Digest.Hex).Files(), 0o755))

	n, freed, err := s.GC(map[string]bool{kept.Digest.String(): true, crashed.Digest.String(): true})
	require.NoError(t, err)
	require.Equal(t, 2, n, "the tree of gone, and the blob beside kept's tree")
	require.Equal(t, int64(2)+kept.Size, freed)
	require.True(t, s.HasTree(kept.Digest))
	require.False(t, s.HasBlob(kept.Digest))
	require.False(t, s.Has(gone.Digest))
	require.Len(t, entries(t, s.dir.TreePartials()), 1, "a kept digest's tree being built is left to its builder")

	_, _, err = s.GC(map[string]bool{})
	require.NoError(t, err)
	require.Empty(t, entries(t, s.dir.TreePartials()))
	require.Empty(t, entries(t, s.dir.Trees("sha256")))
	require.Empty(t, entries(t, s.dir.Stored("sha256")))
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// While a layer unpacks, its blob and its tree are both on disk, briefly:
// the peak is the compressed and the unpacked size together. Once the
// tree is whole the blob goes, and the layer takes its unpacked size.
func TestUnpackPeak(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: a 24 MiB incompressible layer through gzip (14 s under -race); make test runs it, -short skips it")
	}
	s := newTestStore(t)
	body := make([]byte, 24<<20)
	_, _ = rand.Read(body)
	e := putEntry(t, s, "", tgz(t, extract.Gzip, file("model.gguf", string(body))), true, extract.Gzip)
	require.NoError(t, s.Unpack(context.Background(), e, nil, true)) // the moment before the blob goes
	peak := storeUsage(t, s)
	s.dropBlob(e.Digest)
	after := storeUsage(t, s)
	t.Logf("store while unpacking: %d bytes (%.3fx of %d unpacked, %d compressed); after: %d bytes (%.3fx)",
		peak, float64(peak)/float64(len(body)), len(body), e.Size, after, float64(after)/float64(len(body)))
	require.LessOrEqual(t, float64(peak), 2.05*float64(len(body)))
	require.LessOrEqual(t, float64(after), 1.05*float64(len(body)))
}

// storeUsage is what the store takes on disk, in blocks.
func storeUsage(t *testing.T, s *Store) int64 {
	t.Helper()
	var n int64
	require.NoError(t, filepath.WalkDir(string(s.dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	}))
	return n
}

// Unpackers of one layer take turns: each finds the tree whole, the blob
// is removed once, and nothing is left half built.
func TestConcurrentUnpack(t *testing.T) {
	s := newTestStore(t)
	e := putEntry(t, s, "", tgz(t, extract.Gzip, file("a", "a"), file("b", "b")), true, extract.Gzip)
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- s.Unpack(context.Background(), e, nil, false) }()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	require.True(t, s.HasTree(e.Digest))
	require.False(t, s.HasBlob(e.Digest))
	require.Empty(t, entries(t, s.dir.TreePartials()))
	require.NoError(t, s.Verify(e.Digest))
}

// A layer's blob removed between its download and its unpacking (another
// tend's garbage collection) is downloaded once more, and the tree built;
// removed again, the error says it is not stored.
func TestFetchTreeAfterTheBlobWasCollected(t *testing.T) {
	f := newFlakyRegistry(t)
	repo, err := name.NewRepository(strings.TrimPrefix(f.srv.URL, "http://")+"/models/llm", name.Insecure)
	require.NoError(t, err)
	data := tgz(t, extract.Gzip, file("model.gguf", "weights"))
	l := static.NewLayer(data, types.OCILayer)
	require.NoError(t, remoteWriteLayer(repo, l))
	d, err := l.Digest()
	require.NoError(t, err)
	e := modelkit.Entry{Digest: d, Size: int64(len(data)), Unpack: true, Compression: extract.Gzip}

	for _, times := range []int{1, 2} {
		s := newTestStore(t)
		removed := 0
		afterFetch = func(h v1.Hash) {
			if removed < times {
				removed++
				require.NoError(t, os.Remove(s.Path(h)))
			}
		}
		n, err := s.FetchTree(context.Background(), repo, e, nil, false, transport.Options{})
		afterFetch = nil
		if times == 1 {
			require.NoError(t, err)
			require.Equal(t, 2*e.Size, n, "downloaded twice")
			require.True(t, s.HasTree(d))
			continue
		}
		require.ErrorIs(t, err, ErrNotStored)
		require.False(t, s.HasTree(d))
	}
}
