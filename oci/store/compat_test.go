package store

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
)

// build pulls repo@d (with include, when not nil) from the registry into
// s, as the model driver does, and builds its version folder in a new
// folder under s's stateDir, which it returns.
func build(t *testing.T, s *Store, repo name.Repository, d v1.Hash, include []string) (string, error) {
	t.Helper()
	ctx := context.Background()
	opts := transport.Options{Insecure: []string{repo.RegistryStr()}}
	a, _, err := s.FetchArtifact(ctx, repo, d, modelkit.NodePlatform(), opts)
	require.NoError(t, err)
	if a, err = a.Include(include); err != nil {
		return "", err
	}
	_, err = s.Pull(ctx, repo, a, s.Missing(a), 1, nil, opts)
	require.NoError(t, err)
	dir := filepath.Join(filepath.Dir(string(s.dir)), "models", "m", d.Hex[:12]+"-"+randomSuffix(t))
	return dir, s.Materialise(ctx, a, dir, 0)
}

func randomSuffix(t *testing.T) string {
	return filepath.Base(t.TempDir())
}

// push pushes an artifact to reg under repoTag and returns its repository
// and digest.
func pushTo(t *testing.T, reg *testoci.Registry, repoTag, configType string, config []byte, layers ...layer) (name.Repository, v1.Hash) {
	t.Helper()
	return pushSpec(t, reg.Host, repoTag, "", layer{MediaType: configType, Data: config}, layers...)
}

// folder lists the files, folders and links in dir, by slash path.
func folder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err == nil && p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return err
	}))
	slices.Sort(out)
	return out
}

// A ModelKit pulled with an include holds its Kitfile only when a pattern
// selects it, as kit unpack --filter leaves it out; a pattern naming it
// alone matches.
func TestModelKitIncludeLeavesOutTheKitfile(t *testing.T) {
	reg := testoci.Start(t)
	const kit = "application/vnd.kitops.modelkit."
	model := layer{MediaType: kit + "model.v1.tar", Data: tgz(t, extract.Uncompressed, file("model/model.onnx", "weights"))}
	code := layer{MediaType: kit + "code.v1.tar", Data: tgz(t, extract.Uncompressed, file("src/run.py", "print()\n"))}
	config := `{"manifestVersion":"1.0.0","model":{"path":"model/model.onnx","digest":"` + testoci.Digest(model.Data) + `"},` +
		`"code":[{"path":"src","digest":"` + testoci.Digest(code.Data) + `"}]}`
	repo, d := pushTo(t, reg, "models/kit:v1", kit+"config.v1+json", []byte(config), model, code)
	for _, tt := range []struct {
		name    string
		include []string
		want    []string
	}{
		{"no include", nil, []string{modelkit.KitfileName, "model", "model/model.onnx", "src", "src/run.py"}},
		{"the model only", []string{"model/**"}, []string{"model", "model/model.onnx"}},
		{"the model and the Kitfile", []string{"model/**", modelkit.KitfileName}, []string{modelkit.KitfileName, "model", "model/model.onnx"}},
		{"the Kitfile alone", []string{modelkit.KitfileName}, []string{modelkit.KitfileName}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir, err := build(t, newTestStore(t), repo, d, tt.include)
			require.NoError(t, err)
			require.Equal(t, tt.want, folder(t, dir))
		})
	}
}

// Symlinks are written as a layer has them, as tar -x writes them: an
// absolute one, one out of the folder, and one whose target a later layer
// replaces. Fifos and device nodes are skipped and named, and the rest of
// the layer is kept. No write goes through a link: a later entry beneath
// one, or a hard link through one, fails the model and lands nowhere.
func TestModelLayersKeepLinksAndSkipSpecialFiles(t *testing.T) {
	reg := testoci.Start(t)
	image := func(repoTag string, layers ...[]entry) (name.Repository, v1.Hash) {
		var ls []layer
		for _, l := range layers {
			ls = append(ls, layer{MediaType: string(types.OCILayer), Data: tgz(t, extract.Gzip, l...)})
		}
		return pushTo(t, reg, repoTag, string(types.OCIConfigJSON), []byte("{}"), ls...)
	}
	repo, d := image("models/links:v1",
		[]entry{
			file("model.onnx", "weights"),
			{name: "hostname", typ: tar.TypeSymlink, link: "/etc/hostname"},
			{name: "up", typ: tar.TypeSymlink, link: "../outside"},
			{name: "deep/shared", typ: tar.TypeSymlink, link: "../../../../shared/labels.txt"},
			{name: "run/ctl", typ: tar.TypeFifo},
			{name: "dev/null", typ: tar.TypeChar},
			{name: "dev/sda", typ: tar.TypeBlock},
			file("labels.txt", "person\n"),
		},
		[]entry{{name: "up", typ: tar.TypeReg, body: "now a file"}}, // replaces the link, not what it names
	)
	s := newTestStore(t)
	outside := filepath.Join(filepath.Dir(string(s.dir)), "models", "outside")
	require.NoError(t, os.MkdirAll(outside, 0o755))
	ctx := context.Background()
	opts := transport.Options{Insecure: []string{reg.Host}}
	a, _, err := s.FetchArtifact(ctx, repo, d, modelkit.NodePlatform(), opts)
	require.NoError(t, err)
	_, err = s.Pull(ctx, repo, a, s.Missing(a), 1, nil, opts)
	require.NoError(t, err)
	dir := filepath.Join(filepath.Dir(outside), "v1")
	built, err := s.Build(ctx, a, dir, 0)
	require.NoError(t, err)
	require.Equal(t, []extract.Special{{Path: "run/ctl", Kind: "fifo"}, {Path: "dev/null", Kind: "character device"}, {Path: "dev/sda", Kind: "block device"}}, built.Skipped)
	require.Equal(t, []string{"deep", "deep/shared", "dev", "hostname", "labels.txt", "model.onnx", "run", "up"}, folder(t, dir))
	for p, want := range map[string]string{"hostname": "/etc/hostname", "deep/shared": "../../../../shared/labels.txt"} {
		got, err := os.Readlink(filepath.Join(dir, p))
		require.NoError(t, err)
		require.Equal(t, want, got, p)
	}
	b, err := os.ReadFile(filepath.Join(dir, "up"))
	require.NoError(t, err)
	require.Equal(t, "now a file", string(b))
	require.Empty(t, folder(t, outside))

	for _, tt := range []struct {
		name  string
		layer []entry
		want  string
	}{
		{"a file beneath a link out", []entry{{name: "up/x", typ: tar.TypeReg, body: "x"}}, `parent "up" is a symlink to "../outside"`},
		{"a folder beneath a link out", []entry{{name: "up/sub/", typ: tar.TypeDir}}, `parent "up" is a symlink to "../outside"`},
		{"a hard link through a link out", []entry{{name: "h", typ: tar.TypeLink, link: "up/x"}}, "hard link"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(filepath.Join(outside, "x"), []byte("theirs"), 0o644))
			t.Cleanup(func() { _ = os.Remove(filepath.Join(outside, "x")) })
			repo, d := image("models/links:"+strings.ReplaceAll(tt.name, " ", "-"),
				[]entry{{name: "up", typ: tar.TypeSymlink, link: "../outside"}}, tt.layer)
			_, err := build(t, s, repo, d, nil)
			require.ErrorIs(t, err, extract.ErrUnsafeArchive)
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, []string{"x"}, folder(t, outside))
			b, err := os.ReadFile(filepath.Join(outside, "x"))
			require.NoError(t, err)
			require.Equal(t, "theirs", string(b))
		})
	}
}

// What a version takes on disk stays near what it holds: the store keeps
// a tar layer's files once, and once a version is built, the files no
// version links (a later layer's whiteout deleted them, the include left
// them out) are collected. The bound is 1.15 times the unpacked size plus
// 128 KiB, the fixed cost of small artifacts (folders, records, the
// manifest and config), measured in blocks as du counts them.
func TestModelDiskUseStaysNearItsUnpackedSize(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: three images of a 5 MiB incompressible file (13 s under -race); make test runs it, -short skips it")
	}
	reg := testoci.Start(t)
	huge := make([]byte, 5<<20)
	_, _ = rand.Read(huge)
	small := []entry{file("config.json", strings.Repeat("c", 4<<10)), file("labels.txt", strings.Repeat("l", 4<<10))}
	base := append([]entry{{name: "huge.bin", typ: tar.TypeReg, body: string(huge)}}, small...)
	image := func(repoTag string, layers ...[]entry) (name.Repository, v1.Hash) {
		var ls []layer
		for _, l := range layers {
			ls = append(ls, layer{MediaType: string(types.OCILayer), Data: tgz(t, extract.Gzip, l...)})
		}
		return pushTo(t, reg, repoTag, string(types.OCIConfigJSON), []byte("{}"), ls...)
	}
	for _, tt := range []struct {
		name    string
		layers  [][]entry
		include []string
	}{
		{"a file a later layer deletes", [][]entry{base, {{name: ".wh.huge.bin", typ: tar.TypeReg}}}, nil},
		{"a file the include leaves out", [][]entry{base}, []string{"*.json", "*.txt"}},
		{"a file that stays", [][]entry{base}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			repo, d := image("models/disk:"+strings.ReplaceAll(tt.name, " ", "-"), tt.layers...)
			s := newTestStore(t)
			dir, err := build(t, s, repo, d, tt.include)
			require.NoError(t, err)
			unpacked := apparentSize(t, dir)
			used := diskUse(t, filepath.Dir(string(s.dir)))
			t.Logf("%d bytes on disk for %d unpacked (%.2fx)", used, unpacked, float64(used)/float64(unpacked))
			require.LessOrEqual(t, float64(used), 1.15*float64(unpacked)+128<<10)
		})
	}

	t.Run("a version that needs a collected file downloads its layer again", func(t *testing.T) {
		s := newTestStore(t)
		repo, d := image("models/disk:deleted", base, []entry{{name: ".wh.huge.bin", typ: tar.TypeReg}})
		_, err := build(t, s, repo, d, nil)
		require.NoError(t, err)
		repo, d = image("models/disk:base", base)
		_, err = build(t, s, repo, d, nil)
		require.ErrorIs(t, err, ErrNotStored)
		require.ErrorContains(t, err, "huge.bin: the layer's tree no longer holds it")
		dir, err := build(t, s, repo, d, nil)
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dir, "huge.bin"))
		require.NoError(t, err)
		require.True(t, bytes.Equal(huge, b))
	})
}

// apparentSize is the bytes of the regular files under dir.
func apparentSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	}))
	return n
}

// diskUse is what everything under dir takes on disk, in blocks, each
// inode counted once (hard links share one), as du counts it.
func diskUse(t *testing.T, dir string) int64 {
	t.Helper()
	seen := map[uint64]bool{}
	var n int64
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !seen[st.Ino] {
			seen[st.Ino] = true
			n += st.Blocks * 512
		}
		return nil
	}))
	return n
}

// A tar layer's files keep the modification times the layer gives them,
// as tar -x and oras pull of a folder keep them: in every version that
// links them (one inode, one layer, one time), and where a link fails
// and the file is copied.
func TestModelFilesKeepTheirLayersMtimes(t *testing.T) {
	reg := testoci.Start(t)
	when := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, h := range []*tar.Header{
		{Name: "model.onnx", Typeflag: tar.TypeReg, Mode: 0o644, Size: 7, ModTime: when},
		{Name: "sub/labels.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 7, ModTime: when.Add(time.Hour)},
	} {
		require.NoError(t, tw.WriteHeader(h))
		_, err := tw.Write([]byte("content"))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	repo, d := pushTo(t, reg, "models/times:v1", string(types.OCIConfigJSON), []byte("{}"),
		layer{MediaType: string(types.OCIUncompressedLayer), Data: raw.Bytes()})
	s := newTestStore(t)
	check := func(dir string) {
		t.Helper()
		for p, want := range map[string]time.Time{"model.onnx": when, "sub/labels.txt": when.Add(time.Hour)} {
			fi, err := os.Stat(filepath.Join(dir, p))
			require.NoError(t, err)
			require.True(t, want.Equal(fi.ModTime()), "%s: %s, not %s", p, fi.ModTime(), want)
		}
	}
	for range 2 {
		dir, err := build(t, s, repo, d, nil)
		require.NoError(t, err)
		check(dir)
	}
	t.Run("copied where a link fails", func(t *testing.T) {
		link = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EXDEV} }
		t.Cleanup(func() { link = os.Link })
		dir, err := build(t, s, repo, d, nil)
		require.NoError(t, err)
		check(dir)
	})
}
