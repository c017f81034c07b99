package modelkit

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// FuzzLoadArtifact reads arbitrary bytes as a model's manifest or index
// (an index's chosen manifest is the same bytes). Whatever they hold,
// nothing panics, and an artifact that loads has entries whose paths stay
// inside its folder.
func FuzzLoadArtifact(f *testing.F) {
	layer := v1.Descriptor{MediaType: "application/vnd.oci.image.layer.v1.tar", Size: 3,
		Digest:      v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)},
		Annotations: map[string]string{"org.opencontainers.image.title": "model.onnx"}}
	m, _ := json.Marshal(v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Layers: []v1.Descriptor{layer},
		Config: v1.Descriptor{MediaType: "application/vnd.oci.empty.v1+json", Size: 2, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("b", 64)}}})
	f.Add(m)
	idx, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{{MediaType: types.OCIManifestSchema1,
		Size: 10, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("c", 64)}, Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}}})
	f.Add(idx)
	f.Add([]byte(`{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","size":1,"digest":"sha256:` +
		strings.Repeat("a", 64) + `","annotations":{"org.opencontainers.image.title":"../../etc/passwd"}}]}`))
	f.Add([]byte(`{"manifests":[{"digest":"sha256:x"}]}`))
	root := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("d", 64)}
	f.Fuzz(func(t *testing.T, data []byte) {
		read := func(v1.Hash, string) ([]byte, error) { return data, nil }
		a, err := Load(read, root, v1.Platform{OS: "linux", Architecture: "arm64"})
		if err != nil {
			return
		}
		for _, e := range a.Entries {
			if e.Path != "" && (filepath.IsAbs(e.Path) || e.Path != filepath.Clean(e.Path) || e.Path == ".." || strings.HasPrefix(e.Path, "../")) {
				t.Fatalf("entry path %q leaves the artifact's folder", e.Path)
			}
		}
	})
}
