package store

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
)

// Materialise unpacks only the entries of a tar layer the include
// selects, and fails when a pattern matched nothing, listing the files.
func TestMaterialiseInclude(t *testing.T) {
	s := newTestStore(t)
	a := &modelkit.Artifact{Digest: testDigest, Entries: []modelkit.Entry{
		putEntry(t, s, "", tgz(t, extract.Gzip,
			entry{name: "weights/", typ: tar.TypeDir, mode: 0o755},
			file("weights/q4.gguf", "q4"),
			file("weights/q8.gguf", "q8"),
			file("README.md", "# m\n"),
			entry{name: "weights/current.gguf", typ: tar.TypeLink, link: "weights/q8.gguf"},
		), true, extract.Gzip),
		putEntry(t, s, "config.json", []byte("{}"), false, ""),
	}}
	sel, err := a.Include([]string{"weights/q4.gguf", "config.json"})
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "v")
	require.NoError(t, s.Materialise(context.Background(), sel, dir, 0))
	var got []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, filepath.ToSlash(rel))
		}
		return err
	}))
	slices.Sort(got)
	require.Equal(t, []string{"config.json", "weights/q4.gguf"}, got)
	rec, err := s.readTree(a.Entries[0].Digest)
	require.NoError(t, err)
	require.Len(t, rec.Entries, 5, "the layer's tree keeps what the include leaves out")
	q4, err := os.Stat(filepath.Join(dir, "weights", "q4.gguf"))
	require.NoError(t, err)
	tree, err := os.Stat(s.tree(a.Entries[0].Digest).File(rec.Entries[1].File))
	require.NoError(t, err)
	require.True(t, os.SameFile(q4, tree), "a selected file is not a hard link to the tree's")

	sel, err = a.Include([]string{"weights/current.gguf"})
	require.NoError(t, err)
	err = s.Materialise(context.Background(), sel, filepath.Join(t.TempDir(), "v"), 0)
	require.ErrorContains(t, err, `hard link to "weights/q8.gguf", which the model's include leaves out`)

	sel, err = a.Include([]string{"*.safetensors"})
	require.NoError(t, err)
	dir = filepath.Join(t.TempDir(), "v")
	err = s.Materialise(context.Background(), sel, dir, 0)
	require.ErrorIs(t, err, modelkit.ErrIncludeMatchesNothing)
	require.ErrorContains(t, err, `include "*.safetensors" matches no file of the model`)
	require.ErrorContains(t, err, "README.md, weights, weights/current.gguf, weights/q4.gguf, weights/q8.gguf")
	require.NoDirExists(t, dir)
}

// A ModelKit's tar layers hold the paths of their Kitfile entries, by
// type and index as kit unpack maps them, read from the registry and
// from the store alike; a layer whose entry gives another digest is
// refused as kit unpack refuses it.
func TestModelKitLayersHoldTheirEntries(t *testing.T) {
	reg := testoci.Start(t)
	ctx := context.Background()
	const kit = "application/vnd.kitops.modelkit." // kitops pkg/lib/constants/mediaType.go
	part1, part2, code := []byte("p1"), []byte("p2"), []byte("code")
	config := func(codeDigest string) []byte {
		return []byte(`{"manifestVersion":"1.0.0","model":{"path":"weights","parts":[{"path":"lora/a"},{"path":"./lora/b/"}]},` +
			`"code":[{"path":"src","digest":"` + codeDigest + `"}]}`)
	}
	layers := []layer{{MediaType: kit + "modelpart.v1.tar", Data: part1}, {MediaType: kit + "code.v1.tar+gzip", Data: code}, {MediaType: kit + "modelpart.v1.tar", Data: part2}}
	dg, err := testoci.Push(reg.Host, "models/kit:v1", kit+"config.v1+json", config(testoci.Digest(code)), layers)
	require.NoError(t, err)
	repo, err := name.NewRepository(reg.Host+"/models/kit", name.Insecure)
	require.NoError(t, err)
	d, err := v1.NewHash(dg)
	require.NoError(t, err)
	opts := transport.Options{Insecure: []string{reg.Host}}
	holds := func(a *modelkit.Artifact) map[string]string {
		out := map[string]string{}
		for _, e := range a.Entries {
			out[e.Digest.String()] = e.Holds
		}
		return out
	}
	want := map[string]string{testoci.Digest(part1): "lora/a", testoci.Digest(part2): "lora/b", testoci.Digest(code): "src"}
	s := newTestStore(t)
	a, _, err := s.FetchArtifact(ctx, repo, d, modelkit.NodePlatform(), opts)
	require.NoError(t, err)
	require.Equal(t, want, holds(a))
	a, err = s.LoadArtifact(d, modelkit.NodePlatform())
	require.NoError(t, err)
	require.Equal(t, want, holds(a))
	a, err = modelkit.Inspect(ctx, repo, d, modelkit.NodePlatform(), opts)
	require.NoError(t, err)
	require.Equal(t, want, holds(a))

	other := testoci.Digest([]byte("other"))
	dg, err = testoci.Push(reg.Host, "models/kit:bad", kit+"config.v1+json", config(other), layers)
	require.NoError(t, err)
	d, err = v1.NewHash(dg)
	require.NoError(t, err)
	_, _, err = newTestStore(t).FetchArtifact(ctx, repo, d, modelkit.NodePlatform(), opts)
	require.ErrorIs(t, err, modelkit.ErrUnknownLayout)
	require.ErrorContains(t, err, "ModelKit "+dg+": layer "+testoci.Digest(code)+` is code "src", whose digest in the config (Kitfile) is `+other)
}
