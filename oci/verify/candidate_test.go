package verify_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testcosign"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/oci/verify"
)

// VerifyCandidate remembers a digest found unsigned for RecheckUnsigned:
// asked again before then, it answers the same without a request and
// counts no verification; after, it asks again, and takes the digest
// once it is signed. A failure to reach the registry is not remembered
// (Recheck, for a running version, remembers it for a back-off), and
// Verify remembers no failure at all.
func TestVerifyCandidateRemembersUnsigned(t *testing.T) {
	cosign := testcosign.New(t)
	priv, pub := cosign.KeyPair("release")
	reg := testoci.Start(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	var seen []string
	v := &verify.Verifier{Options: transport.Options{Insecure: []string{reg.Host}}, Now: func() time.Time { return now },
		Observe: func(kind, result string) { seen = append(seen, kind+"/"+result) }}
	repo, err := name.NewRepository(reg.Ref("models/m"), name.Insecure)
	require.NoError(t, err)
	bare := reg.PushFiles(t, "models/m:1.3.0", map[string][]byte{"w.bin": []byte("unsigned")})
	target := verify.Target{Kind: verify.KindModel, ID: "model/m", Repository: repo, Digest: bare}

	first := v.VerifyCandidate(ctx, target, keys(pub))
	require.ErrorIs(t, first, verify.ErrUnsigned)
	asked := v.Requests()
	require.Positive(t, asked)

	now = now.Add(verify.RecheckUnsigned - time.Second)
	require.Equal(t, first, v.VerifyCandidate(ctx, target, keys(pub)))
	require.Equal(t, asked, v.Requests(), "an unsigned digest remembered asks the registry nothing")
	require.Equal(t, []string{"model/failed"}, seen, "and is not counted again")

	require.ErrorIs(t, v.Verify(ctx, target, keys(pub)), verify.ErrUnsigned)
	require.Greater(t, v.Requests(), asked, "Verify asks again: a held release is taken once signed")
	asked = v.Requests()

	cosign.Sign(priv, reg.Ref("models/m@"+bare))
	now = now.Add(time.Second)
	require.NoError(t, v.VerifyCandidate(ctx, target, keys(pub)), "asked again once RecheckUnsigned has passed")
	require.Greater(t, v.Requests(), asked)
	require.Equal(t, []string{"model/failed", "model/failed", "model/ok"}, seen)

	t.Run("an unreachable registry is not remembered", func(t *testing.T) {
		down, err := name.NewRepository("127.0.0.1:1/models/m", name.Insecure)
		require.NoError(t, err)
		target := verify.Target{Kind: verify.KindModel, ID: "model/m", Repository: down, Digest: bare}
		seen = nil
		for range 2 {
			err := v.VerifyCandidate(ctx, target, keys(pub))
			require.Error(t, err)
			require.NotErrorIs(t, err, verify.ErrUnsigned)
		}
		require.Equal(t, []string{"model/failed", "model/failed"}, seen, "each call asks")

		t.Run("but Recheck remembers it for RecheckBackoff", func(t *testing.T) {
			seen = nil
			for _, after := range []time.Duration{0, 0, time.Minute - time.Second, time.Second, time.Minute, time.Minute} {
				now = now.Add(after)
				err := v.Recheck(ctx, target, keys(pub))
				require.Error(t, err)
				require.NotErrorIs(t, err, verify.ErrUnsigned)
			}
			require.Equal(t, []string{"model/failed", "model/failed", "model/failed"}, seen,
				"asked at once, 1 minute after, then 2 minutes after the second failure")
		})
	})
}
