package oci

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
)

func TestIncluderMatch(t *testing.T) {
	in := includer{patterns: []string{"*.gguf", "tokenizer.json", "weights/**/*.bin", "docs"}}
	for p, want := range map[string]int{
		"model.gguf":          0,
		"sub/model.gguf":      -1, // * stays in its folder
		"tokenizer.json":      1,
		"weights/a.bin":       2, // ** is any number of folders, none too
		"weights/x/y/a.bin":   2,
		"weights/a.txt":       -1,
		"docs/README.md":      3, // a folder takes all it holds
		"docs/api/index.html": 3,
		"documents/x":         -1,
	} {
		require.Equal(t, want, in.match(p), p)
	}
	for dir, want := range map[string]bool{
		"weights":     true,
		"weights/x/y": true,
		"docs":        true,
		"docs/api":    true,
		"data":        false, // *.gguf matches only at the top
		"sub":         false,
	} {
		require.Equal(t, want, in.mayHold(dir), dir)
	}
	require.True(t, includer{patterns: []string{"**/*.gguf"}}.mayHold("any/where"))
	require.True(t, includer{patterns: []string{"m/{a,b}/*"}}.mayHold("m/c"), "braces are not judged: may hold")
}

// Include keeps the file entries it selects and the tar layers that may
// hold a selected file: an ORAS folder only when its name fits a
// pattern, a layer unpacked at the top always. Blobs then lists what
// the selection downloads.
func TestArtifactInclude(t *testing.T) {
	e := func(p string, unpack bool) Entry {
		return Entry{Digest: hashOf(p), Size: 10, Path: p, Unpack: unpack}
	}
	a := &Artifact{Digest: testDigest, Entries: []Entry{
		e("dataset.bin", false), e("model.gguf", false), e("tokenizer.json", false), e("images", true),
	}}
	sel, err := a.Include([]string{"*.gguf", "tokenizer.json"})
	require.NoError(t, err)
	require.Equal(t, []string{"*.gguf", "tokenizer.json"}, sel.Included())
	var paths []string
	for _, b := range sel.Blobs() {
		for _, x := range a.Entries {
			if x.Digest == b.Digest {
				paths = append(paths, x.Path)
			}
		}
	}
	require.Equal(t, []string{"model.gguf", "tokenizer.json"}, paths)
	require.EqualValues(t, 20, sel.Size())
	require.Nil(t, a.Included(), "the artifact itself is left whole")

	sel, err = a.Include([]string{"images/*.png"})
	require.NoError(t, err, "the ORAS folder images may hold it")
	require.Equal(t, []Entry{e("images", true)}, sel.Entries)

	_, err = a.Include([]string{"*.gguf", "*.safetensors"})
	require.ErrorIs(t, err, ErrIncludeMatchesNothing)
	require.EqualError(t, err, `include "*.safetensors" matches no file of the model `+testDigest.String()+
		`; it holds dataset.bin, model.gguf, tokenizer.json, images/…`)

	a.Entries = append(a.Entries, e("", true))
	sel, err = a.Include([]string{"*.safetensors"})
	require.NoError(t, err, "a tar layer's names are known once it is downloaded")
	require.Equal(t, []Entry{e("", true)}, sel.Entries)

	same, err := a.Include(nil)
	require.NoError(t, err)
	require.Same(t, a, same)
}

// Materialise unpacks only the entries of a tar layer the include
// selects, and fails when a pattern matched nothing, listing the files.
func TestMaterialiseInclude(t *testing.T) {
	s := newTestStore(t)
	a := &Artifact{Digest: testDigest, Entries: []Entry{
		putEntry(t, s, "", tgz(t, Gzip,
			entry{name: "weights/", typ: tar.TypeDir, mode: 0o755},
			file("weights/q4.gguf", "q4"),
			file("weights/q8.gguf", "q8"),
			file("README.md", "# m\n"),
			entry{name: "weights/current.gguf", typ: tar.TypeLink, link: "weights/q8.gguf"},
		), true, Gzip),
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
	require.ErrorIs(t, err, ErrIncludeMatchesNothing)
	require.ErrorContains(t, err, `include "*.safetensors" matches no file of the model`)
	require.ErrorContains(t, err, "README.md, weights, weights/current.gguf, weights/q4.gguf, weights/q8.gguf")
	require.NoDirExists(t, dir)
}

// hashOf is a made-up digest for s.
func hashOf(s string) v1.Hash {
	sum := sha256.Sum256([]byte(s))
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// A tar layer unpacked at the top that declares what it holds is kept
// only when a pattern may select a path there.
func TestArtifactIncludeHolds(t *testing.T) {
	e := func(holds string) Entry { return Entry{Digest: hashOf(holds), Size: 10, Unpack: true, Holds: holds} }
	a := &Artifact{Digest: testDigest, Entries: []Entry{e("model.gguf"), e("data"), e("")}}
	sel, err := a.Include([]string{"*.gguf"})
	require.NoError(t, err)
	require.Equal(t, []Entry{e("model.gguf"), e("")}, sel.Entries, "a layer that does not say may hold anything")
	a.Entries = a.Entries[:2]
	sel, err = a.Include([]string{"data/train/*"})
	require.NoError(t, err)
	require.Equal(t, []Entry{e("data")}, sel.Entries)
	_, err = a.Include([]string{"*.safetensors"})
	require.ErrorIs(t, err, ErrIncludeMatchesNothing)
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
	opts := Options{Insecure: []string{reg.Host}}
	holds := func(a *Artifact) map[string]string {
		out := map[string]string{}
		for _, e := range a.Entries {
			out[e.Digest.String()] = e.Holds
		}
		return out
	}
	want := map[string]string{testoci.Digest(part1): "lora/a", testoci.Digest(part2): "lora/b", testoci.Digest(code): "src"}
	s := newTestStore(t)
	a, _, err := s.FetchArtifact(ctx, repo, d, NodePlatform(), opts)
	require.NoError(t, err)
	require.Equal(t, want, holds(a))
	a, err = s.LoadArtifact(d, NodePlatform())
	require.NoError(t, err)
	require.Equal(t, want, holds(a))
	a, err = Inspect(ctx, repo, d, NodePlatform(), opts)
	require.NoError(t, err)
	require.Equal(t, want, holds(a))

	other := testoci.Digest([]byte("other"))
	dg, err = testoci.Push(reg.Host, "models/kit:bad", kit+"config.v1+json", config(other), layers)
	require.NoError(t, err)
	d, err = v1.NewHash(dg)
	require.NoError(t, err)
	_, _, err = newTestStore(t).FetchArtifact(ctx, repo, d, NodePlatform(), opts)
	require.ErrorIs(t, err, ErrUnknownLayout)
	require.ErrorContains(t, err, "ModelKit "+dg+": layer "+testoci.Digest(code)+` is code "src", whose digest in the config (Kitfile) is `+other)
}
