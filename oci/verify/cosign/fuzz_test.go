package cosign

import (
	"testing"

	"github.com/tend-dev/tend/manifest"
)

// FuzzCheckBundle feeds the bundle check arbitrary bytes as a bundle: it
// never accepts them (there is no key to match) and never panics.
func FuzzCheckBundle(f *testing.F) {
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"x"}},"dsseEnvelope":{"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[{"sig":"AA=="}]}}`))
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"x"}},"messageSignature":{"messageDigest":{"algorithm":"SHA2_256","digest":"AAAA"},"signature":"AA=="}}`))
	f.Add([]byte(`{}`))
	p := &policy{block: &manifest.CosignVerify{Keys: []string{"/k.pub"}}}
	const digest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	f.Fuzz(func(t *testing.T, b []byte) {
		var tl tally
		if p.checkBundle(b, digest, &tl) {
			t.Fatal("a bundle passed with no key to verify it")
		}
		_ = tl.found()
	})
}

// FuzzCheckLegacy feeds the legacy payload check arbitrary payloads and
// signatures: with no key nothing passes, and nothing panics.
func FuzzCheckLegacy(f *testing.F) {
	f.Add([]byte(`{"critical":{"image":{"docker-manifest-digest":"sha256:00"},"type":"cosign container image signature"}}`), []byte{0})
	p := &policy{block: &manifest.CosignVerify{}}
	f.Fuzz(func(t *testing.T, payload, sig []byte) {
		var tl tally
		if p.checkLegacy(payload, sig, "sha256:00", &tl) {
			t.Fatal("a legacy signature passed with no key")
		}
	})
}
