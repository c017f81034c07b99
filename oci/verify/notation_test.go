package verify_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/notaryproject/notation-go"
	"github.com/notaryproject/notation-go/registry"
	"github.com/notaryproject/notation-go/signer"
	"github.com/stretchr/testify/require"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/oci/verify"
)

// ca is a test certificate authority and a code signing leaf it issued.
type ca struct {
	root    *x509.Certificate
	leaf    *x509.Certificate
	leafKey *ecdsa.PrivateKey
}

func newCA(t *testing.T, name string, leafNotAfter time.Time) ca {
	t.Helper()
	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	rootTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " root", Organization: []string{"acme"}, Country: []string{"US"}, Province: []string{"WA"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, &rootKey.PublicKey, rootKey)
	require.NoError(t, err)
	root, err := x509.ParseCertificate(rootDER)
	require.NoError(t, err)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name + " release", Organization: []string{"acme"}, Country: []string{"US"}, Province: []string{"WA"}},
		NotBefore: now.Add(-2 * time.Hour), NotAfter: leafNotAfter, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, root, &leafKey.PublicKey, rootKey)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(leafDER)
	require.NoError(t, err)
	return ca{root: root, leaf: leaf, leafKey: leafKey}
}

// trust writes a Notation trust store holding c's root and a trust policy
// that trusts it for every repository.
func (c ca) trust(t *testing.T) *manifest.NotationVerify {
	t.Helper()
	dir := t.TempDir()
	store := filepath.Join(dir, "truststore")
	require.NoError(t, os.MkdirAll(filepath.Join(store, "x509/ca/fleet"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(store, "x509/ca/fleet/root.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.root.Raw}), 0o644))
	policy := filepath.Join(dir, "trustpolicy.json")
	require.NoError(t, os.WriteFile(policy, []byte(`{"version": "1.0", "trustPolicies": [{"name": "fleet", "registryScopes": ["*"],
		"signatureVerification": {"level": "strict"}, "trustStores": ["ca:fleet"], "trustedIdentities": ["*"]}]}`), 0o644))
	return &manifest.NotationVerify{TrustPolicy: policy, TrustStore: store}
}

// sign signs host/repo@digest with c's leaf, as notation sign does.
func (c ca) sign(t *testing.T, host, repo, digest string) {
	t.Helper()
	s, err := signer.NewGenericSigner(c.leafKey, []*x509.Certificate{c.leaf, c.root})
	require.NoError(t, err)
	r, err := remote.NewRepository(host + "/" + repo)
	require.NoError(t, err)
	r.PlainHTTP = true
	_, err = notation.Sign(context.Background(), s, registry.NewRepository(r), notation.SignOptions{
		SignerSignOptions: notation.SignerSignOptions{SignatureMediaType: "application/jose+json"},
		ArtifactReference: host + "/" + repo + "@" + digest,
	})
	require.NoError(t, err)
}

// Notation signatures, made with notation-go's signer and stored on
// Debian's docker-registry (the referrers tag schema), verified through a
// trust policy and trust store: the trusted CA's passes, another CA's,
// none and an expired certificate's are refused.
func TestNotation(t *testing.T) {
	host := testoci.StartDistribution(t)
	opts := transport.Options{Insecure: []string{host}}
	ctx := context.Background()
	good := newCA(t, "good", time.Now().Add(24*time.Hour))
	other := newCA(t, "other", time.Now().Add(24*time.Hour))
	req := []*manifest.ArtifactVerify{{Notation: good.trust(t)}}
	push := func(tag, content string) (verify.Target, string) {
		d, err := testoci.PushFiles(host, "models/n:"+tag, map[string][]byte{"w": []byte(content)})
		require.NoError(t, err)
		return (&signed{host: host}).target(t, "models/n", d), d
	}

	signedT, d := push("v1", "one")
	good.sign(t, host, "models/n", d)
	v := &verify.Verifier{Options: opts}
	require.NoError(t, v.Verify(ctx, signedT, req))
	n := v.Requests()
	t.Logf("a new digest: %d requests", n)
	require.NoError(t, v.Verify(ctx, signedT, req))
	require.Equal(t, n, v.Requests(), "remembered")

	otherT, d := push("v2", "two")
	other.sign(t, host, "models/n", d)
	err := v.Verify(ctx, otherT, req)
	require.ErrorIs(t, err, verify.ErrUnsigned)
	require.ErrorContains(t, err, "no Notation signature the trust policy "+req[0].Notation.TrustPolicy+" allows")

	bareT, _ := push("v3", "three")
	require.ErrorIs(t, v.Verify(ctx, bareT, req), verify.ErrUnsigned)

	// A certificate that expires after it signed: notation-go signs with
	// no expired certificate, so the test waits for this one to expire.
	expired := newCA(t, "expired", time.Now().Add(2*time.Second))
	expT, d := push("v4", "four")
	expired.sign(t, host, "models/n", d)
	expReq := []*manifest.ArtifactVerify{{Notation: expired.trust(t)}}
	for deadline := time.Now().Add(10 * time.Second); !time.Now().After(expired.leaf.NotAfter); {
		require.True(t, time.Now().Before(deadline))
		time.Sleep(100 * time.Millisecond)
	}
	err = (&verify.Verifier{Options: opts}).Verify(ctx, expT, expReq)
	require.ErrorIs(t, err, verify.ErrUnsigned)
	require.ErrorContains(t, err, "expired")
	t.Logf("expired: %v", err)
}
