package gitsource

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

// A cert-authority line vouches for a user certificate only when the
// authority signed it: one that merely names the authority (its
// SignatureKey), signed by another key, is refused.
func TestCertificateMustBeSignedByItsAuthority(t *testing.T) {
	key := func() (ssh.PublicKey, ssh.Signer) {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		signer, err := ssh.NewSignerFromKey(priv)
		require.NoError(t, err)
		sp, err := ssh.NewPublicKey(pub)
		require.NoError(t, err)
		return sp, signer
	}
	caPub, ca := key()
	_, mallory := key()
	userPub, _ := key()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	cert := func(signer ssh.Signer) *ssh.Certificate {
		c := &ssh.Certificate{Key: userPub, CertType: ssh.UserCert, KeyId: "alice", ValidPrincipals: []string{"alice@example.com"},
			ValidAfter: uint64(now.Add(-time.Hour).Unix()), ValidBefore: uint64(now.Add(time.Hour).Unix())}
		require.NoError(t, c.SignCert(rand.Reader, signer))
		return c
	}
	line := allowedSigner{line: 1, principals: []string{"*@example.com"}, key: caPub, ca: true}

	ok, why := line.signs(cert(ca), now)
	require.True(t, ok, why)

	forged := cert(mallory)
	forged.SignatureKey = caPub // claims the authority, signed by another key
	ok, why = line.signs(forged, now)
	require.False(t, ok)
	require.Contains(t, why, "line 1: the certificate does not check against its authority")

	ok, why = line.signs(cert(ca), now.Add(2*time.Hour))
	require.False(t, ok)
	require.Contains(t, why, "not valid at the commit's time")
}
