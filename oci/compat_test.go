package oci

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
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
