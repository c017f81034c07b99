package cosign

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
)

// noCTLogs is sigstore-go's virtual Sigstore (its in-process Fulcio,
// Rekor and timestamp authority), whose certificates carry no SCTs: it
// lists no CT log, so none is required.
type noCTLogs struct{ *ca.VirtualSigstore }

func (noCTLogs) CTLogs() map[string]*root.TransparencyLog { return nil }

// statement is a cosign v3 signature's in-toto statement of digest.
func statement(t *testing.T, digest string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"digest": map[string]string{"sha256": strings.TrimPrefix(digest, "sha256:")}}},
		"predicateType": "https://sigstore.dev/cosign/sign/v1",
		"predicate":     map[string]any{},
	})
	require.NoError(t, err)
	return b
}

// Keyless signatures: a certificate the virtual Sigstore issues to an
// identity, with a transparency log entry, passes for that identity and
// is refused for another issuer or subject, or for another digest.
func TestKeyless(t *testing.T) {
	vs, err := ca.NewVirtualSigstore()
	require.NoError(t, err)
	const (
		digest  = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
		other   = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
		issuer  = "https://token.actions.githubusercontent.com"
		subject = "https://github.com/acme/fleet/.github/workflows/release.yml@refs/heads/main"
	)
	entity, err := vs.Attest(subject, issuer, statement(t, digest))
	require.NoError(t, err)

	policyOf := func(t *testing.T, ids ...manifest.CosignIdentity) *policy {
		t.Helper()
		c := &manifest.CosignVerify{Identities: ids, TrustedRoot: "/trusted_root.json"}
		p := &policy{block: c, trusted: noCTLogs{vs}}
		for _, id := range ids {
			ci, err := sgverify.NewShortCertificateIdentity(id.Issuer, "", "", id.SubjectRegExp)
			require.NoError(t, err)
			p.identities = append(p.identities, ci)
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		ids    []manifest.CosignIdentity
		digest string
		found  string // "" when it passes
	}{
		{"the identity signed", []manifest.CosignIdentity{{Issuer: issuer, SubjectRegExp: "^https://github.com/acme/fleet/"}}, digest, ""},
		{"one of two identities", []manifest.CosignIdentity{{Issuer: "https://accounts.google.com", SubjectRegExp: ".*"}, {Issuer: issuer, SubjectRegExp: "^https://github.com/acme/"}}, digest, ""},
		{"another issuer", []manifest.CosignIdentity{{Issuer: "https://accounts.google.com", SubjectRegExp: ".*"}}, digest, "found 1 signature by another identity"},
		{"another subject", []manifest.CosignIdentity{{Issuer: issuer, SubjectRegExp: "^https://github.com/evil/"}}, digest, "found 1 signature by another identity"},
		{"another digest", []manifest.CosignIdentity{{Issuer: issuer, SubjectRegExp: ".*"}}, other, "found 1 signature of another digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tl tally
			ok := policyOf(t, tc.ids...).check(entity, tc.digest, &tl)
			if tc.found == "" {
				require.True(t, ok, tl.found())
				return
			}
			require.False(t, ok)
			require.Contains(t, tl.found(), tc.found)
		})
	}

	t.Run("keys do not accept a keyless signature", func(t *testing.T) {
		var tl tally
		p := &policy{block: &manifest.CosignVerify{Keys: []string{"/k.pub"}}, keys: []key{{path: "/k.pub"}}}
		require.False(t, p.check(entity, digest, &tl))
		require.Contains(t, tl.found(), "found 1 signature made keyless")
	})
}
