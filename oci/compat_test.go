package oci

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// build pulls repo@d (with include, when not nil) from the registry into
// s, as the model driver does, and builds its version folder in a new
// folder under s's stateDir, which it returns.
func build(t *testing.T, s *Store, repo name.Repository, d v1.Hash, include []string) (string, error) {
	t.Helper()
	ctx := context.Background()
	opts := Options{Insecure: []string{repo.RegistryStr()}}
	a, _, err := s.FetchArtifact(ctx, repo, d, NodePlatform(), opts)
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
	model := layer{MediaType: kit + "model.v1.tar", Data: tgz(t, Uncompressed, file("model/model.onnx", "weights"))}
	code := layer{MediaType: kit + "code.v1.tar", Data: tgz(t, Uncompressed, file("src/run.py", "print()\n"))}
	config := `{"manifestVersion":"1.0.0","model":{"path":"model/model.onnx","digest":"` + testoci.Digest(model.Data) + `"},` +
		`"code":[{"path":"src","digest":"` + testoci.Digest(code.Data) + `"}]}`
	repo, d := pushTo(t, reg, "models/kit:v1", kit+"config.v1+json", []byte(config), model, code)
	for _, tt := range []struct {
		name    string
		include []string
		want    []string
	}{
		{"no include", nil, []string{KitfileName, "model", "model/model.onnx", "src", "src/run.py"}},
		{"the model only", []string{"model/**"}, []string{"model", "model/model.onnx"}},
		{"the model and the Kitfile", []string{"model/**", KitfileName}, []string{KitfileName, "model", "model/model.onnx"}},
		{"the Kitfile alone", []string{KitfileName}, []string{KitfileName}},
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
			ls = append(ls, layer{MediaType: string(types.OCILayer), Data: tgz(t, Gzip, l...)})
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
	opts := Options{Insecure: []string{reg.Host}}
	a, _, err := s.FetchArtifact(ctx, repo, d, NodePlatform(), opts)
	require.NoError(t, err)
	_, err = s.Pull(ctx, repo, a, s.Missing(a), 1, nil, opts)
	require.NoError(t, err)
	dir := filepath.Join(filepath.Dir(outside), "v1")
	built, err := s.Build(ctx, a, dir, 0)
	require.NoError(t, err)
	require.Equal(t, []Special{{"run/ctl", "fifo"}, {"dev/null", "character device"}, {"dev/sda", "block device"}}, built.Skipped)
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
			require.ErrorIs(t, err, ErrUnsafeArchive)
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, []string{"x"}, folder(t, outside))
			b, err := os.ReadFile(filepath.Join(outside, "x"))
			require.NoError(t, err)
			require.Equal(t, "theirs", string(b))
		})
	}
}
