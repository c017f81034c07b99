package verify

import (
	"testing"
)

// FuzzBundlesOf feeds the referrers index parser what a registry might
// send: it returns descriptors or an error, never panics, and never more
// than MaxIndexEntries.
func FuzzBundlesOf(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.dev.sigstore.bundle.v0.3+json","digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000","size":10}]}`))
	f.Add([]byte(`{"manifests":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ds, err := bundlesOf(b)
		if err == nil && len(ds) > MaxIndexEntries {
			t.Fatalf("%d bundles, over %d", len(ds), MaxIndexEntries)
		}
	})
}
