package modelkit

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"
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
