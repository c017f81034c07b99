package e2e

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// tourFleet is the layout the README's tour teaches: profiles/ give the
// devices their resources, and devices/{device} only names each device
// and its labels. At HEAD a device is added with labels only.
func tourFleet(t *testing.T) *testgit.Repo {
	r := testgit.NewRepo(t)
	r.WriteFile("profiles/inference.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: inference}\nspec:\n"+
		"  selector: {matchLabels: {hw: demo}}\n  vars: {threshold: \"0.6\"}\n"+
		"  files:\n    - {path: /etc/infer/config.yaml, content: \"threshold: ${var:threshold}\\n\"}\n")
	labelsOnly := func(name string) string {
		return "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata:\n  name: " + name + "\n  labels: {site: lab, hw: demo}\n"
	}
	r.WriteFile("devices/demo-01/device.yaml", labelsOnly("demo-01"))
	r.Commit("one device")
	r.WriteFile("devices/demo-02/device.yaml", labelsOnly("demo-02"))
	r.Commit("demo-02")
	return r
}

// CI that reads only the device folders of a fleet of profiles sees
// devices that render to nothing, and says so (validate --all and diff,
// exit codes unchanged); with every source path the agents read, the
// devices have their profiles' resources and no warning.
func TestCIWarnsOfDevicesThatRenderToNothing(t *testing.T) {
	r := tourFleet(t)
	dirs := map[string]string{r.Dir(): "<repo>"}

	out, errOut, code := tend(t, append([]string{"validate", "--all"}, ciFlags(t, r.Dir())...)...)
	require.Equal(t, 0, code, errOut)
	diffOut, errOut, code := tend(t, append([]string{"diff", "--base", "HEAD~1", "--head", "HEAD"}, ciFlags(t, r.Dir())...)...)
	require.Equal(t, 2, code, errOut)
	mdOut, errOut, code := tend(t, append([]string{"diff", "--base", "HEAD~1", "--head", "HEAD", "--format", "markdown"}, ciFlags(t, r.Dir())...)...)
	require.Equal(t, 2, code, errOut)
	golden.Assert(t, "ci-render-nothing.golden", []byte("$ tend validate --all --path 'devices/{device}'\n"+stable(out, dirs)+
		"\n$ tend diff --path 'devices/{device}' --base HEAD~1 --head HEAD\n"+stableDiff(diffOut, dirs)+
		"\n$ tend diff --path 'devices/{device}' --base HEAD~1 --head HEAD --format markdown\n"+stableDiff(mdOut, dirs)))

	paths := []string{"--path", "profiles", "--path", "devices/{device}"}
	out, errOut, code = tend(t, append([]string{"validate", "--all"}, ciFlags(t, r.Dir(), paths...)...)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "valid: device demo-02 at HEAD@sha1:")
	require.Contains(t, out, ": 0 models, 1 file, 0 services\n")
	require.NotContains(t, out, "warning")
	out, errOut, code = tend(t, append([]string{"diff", "--base", "HEAD~1", "--head", "HEAD"}, ciFlags(t, r.Dir(), paths...)...)...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, out, "+ file/etc/infer/config.yaml  declared  (profile/inference)")
	require.NotContains(t, out, "Warning")
}

// A commit that only pauses a rollout changes no device's plan, but it is
// a change: diff names the rollout, the field and the devices it governs,
// and exits 2.
func TestDiffShowsARolloutPaused(t *testing.T) {
	r := tourFleet(t)
	rollout := func(paused bool) string {
		return "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n  paused: " + strconv.FormatBool(paused) + "\n"
	}
	r.WriteFile("profiles/rollout.yaml", rollout(false))
	r.Commit("a rollout")
	r.WriteFile("profiles/rollout.yaml", rollout(true))
	r.Commit("pause")
	out, errOut, code := tend(t, append([]string{"diff", "--base", "HEAD~1", "--head", "HEAD"}, ciFlags(t, r.Dir(), "--path", "profiles", "--path", "devices/{device}")...)...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, out, "Rollouts changed:\n  rollout/default: paused false → true\n    governs 2 devices: demo-01, demo-02\n")
	require.Contains(t, out, "No plan changes: 2 devices, none changes; 1 rollout changed.")
}
