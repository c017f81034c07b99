package cosign

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/verify"
)

// The files a verify block names are read bounded, and a file that is
// missing, too large or not what it should be is an error naming it.
func TestPolicyFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	garbage := write("garbage.json", "not json")
	huge := write("huge.pub", strings.Repeat("x", verify.MaxKeyFile+1))
	notKey := write("not.pub", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
	missing := filepath.Join(dir, "missing.pub")
	for _, tc := range []struct {
		name string
		c    manifest.CosignVerify
		want string
	}{
		{"a missing key", manifest.CosignVerify{Keys: []string{missing}}, "read cosign public key: open " + missing},
		{"a key file too large", manifest.CosignVerify{Keys: []string{huge}}, "cosign public key " + huge + " is over 65536 bytes: is it the right file?"},
		{"a PEM that is no key", manifest.CosignVerify{Keys: []string{notKey}}, "cosign public key " + notKey + ": "},
		{"a trusted root that is no JSON", manifest.CosignVerify{TrustedRoot: garbage, Identities: []manifest.CosignIdentity{{Issuer: "i", SubjectRegExp: "s"}}},
			"trusted root " + garbage + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadPolicy(&tc.c)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
