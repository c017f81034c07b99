package verify_test

import (
	"context"
	"testing"

	"github.com/tend-dev/tend/oci/verify"
)

// BenchmarkVerifyNewDigest verifies a digest signed by the real cosign
// CLI on Debian's docker-registry as a tick that finds a new release does:
// a Verifier that has not seen it (the registry session of the tick is
// shared). It reports the requests a verification sends.
// BenchmarkCosignVerify runs cosign verify on the same artifact.
func BenchmarkVerifyNewDigest(b *testing.B) {
	s, _, pub, digest := signedArtifact(b)
	ctx := context.Background()
	var requests int64
	for b.Loop() {
		v := &verify.Verifier{Options: s.opts}
		if err := v.Verify(ctx, s.target(b, "models/bench", digest), keys(pub)); err != nil {
			b.Fatal(err)
		}
		requests += v.Requests()
	}
	b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
}

// BenchmarkVerifyRemembered is a tick that finds the digest it verified.
func BenchmarkVerifyRemembered(b *testing.B) {
	s, _, pub, digest := signedArtifact(b)
	ctx := context.Background()
	v := &verify.Verifier{Options: s.opts}
	if err := v.Verify(ctx, s.target(b, "models/bench", digest), keys(pub)); err != nil {
		b.Fatal(err)
	}
	first := v.Requests()
	for b.Loop() {
		if err := v.Verify(ctx, s.target(b, "models/bench", digest), keys(pub)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(v.Requests()-first)/float64(b.N), "requests/op")
}

// BenchmarkCosignVerify is cosign verify --key of the artifact
// BenchmarkVerifyNewDigest verifies, offline (no transparency log).
func BenchmarkCosignVerify(b *testing.B) {
	s, ref, pub, _ := signedArtifact(b)
	for b.Loop() {
		s.cosign.Run("verify", "--key", pub, "--insecure-ignore-tlog=true", "--allow-http-registry", "--allow-insecure-registry", ref)
	}
}

func signedArtifact(b *testing.B) (s *signed, ref, pub, digest string) {
	b.Helper()
	s = newSigned(b)
	priv, pub := s.cosign.KeyPair("bench")
	digest = s.push(b, "models/bench:v1", "weights")
	ref = s.host + "/models/bench@" + digest
	s.cosign.Sign(priv, ref)
	return s, ref, pub, digest
}
