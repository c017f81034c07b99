package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// CI publishes the fleet repo to Debian's docker-registry with tend
// publish, and a device applies it with tend apply --repo oci://…: the
// same files as from Git, the same revision names, the same digest for
// the same commit, and a new publish applied.
func TestPublishThenApply(t *testing.T) {
	host := testoci.StartDistribution(t)
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	first := repo.Commit("one")
	target := "oci://" + host + "/fleet:main"
	publish := func() string {
		t.Helper()
		out, errOut, code := tend(t, "publish", "--repo", repo.Dir(), "--rev", "main", "--insecure-registry", host, "--log-format", "text", target)
		require.Equal(t, 0, code, errOut)
		require.Regexp(t, regexp.MustCompile(`^sha256:[0-9a-f]{64}\n$`), out)
		require.Contains(t, errOut, "revision=main@sha1:")
		return strings.TrimSpace(out)
	}
	digest := publish()
	require.Equal(t, digest, publish(), "the same commit publishes the same artifact")

	n := newNode(t, target, "--insecure-registry", host)
	out, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "main@sha1:"+first)
	require.Equal(t, "threshold: 0.4\n", n.read("etc/infer/config.yaml"))
	out, errOut, code = n.tend("plan", "--detailed-exitcode")
	require.Equal(t, 0, code, out+errOut)

	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.5\n", "")))
	second := repo.Commit("two")
	require.NotEqual(t, digest, publish())
	out, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "main@sha1:"+second)
	require.Equal(t, "threshold: 0.5\n", n.read("etc/infer/config.yaml"))

	// A tag that does not exist is named; the node keeps its state.
	missing := newNode(t, "oci://"+host+"/fleet:nope", "--insecure-registry", host)
	_, errOut, code = missing.tend("apply")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "tag nope not found in "+host+"/fleet; close tags: main")

	// CI commands read Git, not the artifact.
	_, errOut, code = tend(t, "publish", "--repo", target, target)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "tend publish reads the Git fleet repo")
	_, errOut, code = tend(t, "diff", "--repo", target, "--base", "main", "--head", "main")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "is a published artifact: tend diff and validate --all read the Git fleet repo")
}
