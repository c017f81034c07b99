package e2e

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// The CI commands read a bare repository — a server-side hook's, a `git
// clone --mirror` cache, a post-receive publish — as a path or a file://
// URL.
func TestCIReadsBareRepository(t *testing.T) {
	r := exampleFleet(t)
	bare := filepath.Join(t.TempDir(), "fleet.git")
	r.Git("clone", "--quiet", "--mirror", r.Dir(), bare)

	for _, repo := range []string{bare, "file://" + bare} {
		out, errOut, code := tend(t, append([]string{"diff", "--base", "main~1", "--head", "main"}, ciFlags(t, repo)...)...)
		require.Equal(t, 2, code, errOut)
		require.Contains(t, out, "4 of 11 devices change (1 added, 1 removed, 2 changed)")

		out, errOut, code = tend(t, append([]string{"validate", "--all", "--rev", "main"}, ciFlags(t, repo)...)...)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "valid: device cam-005 at main@sha1:")
	}

	reg := testoci.Start(t)
	out, errOut, code := tend(t, "publish", "--repo", bare, "--insecure-registry", reg.Host, "--log-format", "text", "oci://"+reg.Ref("fleet:main"))
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, regexp.MustCompile(`^sha256:[0-9a-f]{64}\n$`), out)
	require.Contains(t, errOut, "revision=main@sha1:"+r.Head())
}
