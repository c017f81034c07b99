package modelkit

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/oci/extract"
)

var testDigest = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("d", 64)}

// A manifest with more layers than a model has is refused at once, and
// the collision check takes time linear in the layers.
func TestLayerCountIsBounded(t *testing.T) {
	m := &v1.Manifest{Config: v1.Descriptor{MediaType: types.OCIConfigJSON}}
	for i := range MaxLayers + 1 {
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: types.OCILayer, Size: 1,
			Digest:      v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%064x", i)},
			Annotations: map[string]string{annotationTitle: fmt.Sprintf("f%d", i)}})
	}
	_, _, err := layout(testDigest, m)
	require.ErrorIs(t, err, ErrUnknownLayout)
	require.ErrorContains(t, err, fmt.Sprintf("has %d layers; tend reads at most %d", MaxLayers+1, MaxLayers))

	m.Layers = m.Layers[:MaxLayers]
	format, entries, err := layout(testDigest, m)
	require.NoError(t, err)
	require.Equal(t, FormatORAS, format)
	require.Len(t, entries, MaxLayers)
	require.NoError(t, CheckEntries(&Artifact{Digest: testDigest, Entries: entries}))
}

func TestCheckEntriesCollisions(t *testing.T) {
	h := func(i int) v1.Hash { return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%064x", i)} }
	for _, tc := range []struct {
		name    string
		entries []Entry
		want    string
	}{
		{"same path", []Entry{{Digest: h(1), Path: "a/b"}, {Digest: h(2), Path: "a/b"}}, `path "a/b" collides with layer`},
		{"file where a folder is needed", []Entry{{Digest: h(1), Path: "a"}, {Digest: h(2), Path: "a/b/c"}},
			fmt.Sprintf(`path "a" is a file, and layer %s needs it as a folder for "a/b/c"`, h(2))},
		{"a tar folder may hold files", []Entry{{Digest: h(1), Path: "a", Unpack: true}, {Digest: h(2), Path: "a/b"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckEntries(&Artifact{Digest: testDigest, Entries: tc.entries})
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, extract.ErrUnsafeArchive)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// BenchmarkCheckEntries checks the paths of the most layers tend reads.
func BenchmarkCheckEntries(b *testing.B) {
	var entries []Entry
	for i := range MaxLayers {
		entries = append(entries, Entry{Digest: v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%064x", i)},
			Path: strings.Repeat("d/", i%8) + fmt.Sprintf("f%d", i)})
	}
	a := &Artifact{Digest: testDigest, Entries: entries}
	for b.Loop() {
		if err := CheckEntries(a); err != nil {
			b.Fatal(err)
		}
	}
}

// The file metadata annotation's mode under tend's write-bit policy.
func TestFileModeFromMetadata(t *testing.T) {
	for _, tt := range []struct {
		annotations map[string]string
		want        fs.FileMode
	}{
		{nil, 0},
		{map[string]string{annotationFileMetadata: `{"name":"a"}`}, 0},
		{map[string]string{annotationFileMetadata: `{"mode":420}`}, 0}, // 0644: the blob's 0444, a link
		{map[string]string{annotationFileMetadata: `{"mode":493}`}, 0o555},
		{map[string]string{annotationFileMetadata: `{"mode":384}`}, 0o400},
		{map[string]string{annotationFileMetadata: `{"mode":416}`}, 0o440},       // 0640
		{map[string]string{annotationFileMetadata: `{"mode":128}`}, 0o400},       // 0200: its owner reads it
		{map[string]string{annotationFileMetadata: `{"mode":2541}`}, 0o555},      // 04755: no setuid
		{map[string]string{annotationFileMetadata: `{"mode":33261}`}, 0o555},     // st_mode of a 0755 file
		{map[string]string{annotationFileMetadataLegacy: `{"mode":511}`}, 0o555}, // 0777
	} {
		got, err := fileMode(tt.annotations)
		require.NoError(t, err, "%v", tt.annotations)
		require.Equal(t, tt.want, got, "%v", tt.annotations)
	}
	_, err := fileMode(map[string]string{annotationFileMetadata: `{"mode":"0755"}`})
	require.ErrorContains(t, err, "annotation "+annotationFileMetadata)
}
