package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// A release a paused rollout holds: plan says so on stderr and prints the
// applied revision's plan (drift reverts); apply keeps the applied
// release and reverts drift, and exits 0.
func TestPlanAndApplySayWhatARolloutHolds(t *testing.T) {
	repo := testgit.NewRepo(t)
	paused := "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec: {selector: {}, paused: true}\n"
	repo.WriteFile("devices/cam-017/rollout.yaml", paused)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	applied := repo.Commit("one file")
	n := newNode(t, repo.Dir())
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.5\n", "")))
	release := repo.Commit("a release")
	n.write("etc/infer/config.yaml", "edited by hand\n")
	out, errOut, code := n.tend("plan", "--detailed-exitcode")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "Release HEAD@sha1:"+release+" held: rollout paused; the plan keeps HEAD@sha1:"+applied+" and reverts drift only\n")
	require.Contains(t, out, "drift: content changed on node")
	require.NotContains(t, out, "threshold: 0.5")

	_, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "held: rollout paused")
	require.Equal(t, "threshold: 0.4\n", n.read("etc/infer/config.yaml"), "drift reverted to the applied release")
}

// A model tag newly matched by a semver policy, at the applied commit, is
// a release a paused rollout holds: plan names the model and keeps the
// applied digest.
func TestPlanSaysARolloutHoldsANewModelDigest(t *testing.T) {
	reg := testoci.Start(t)
	reg.PushFiles(t, "models/m:1.0.0", map[string][]byte{"model.onnx": []byte("one")})
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/rollout.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec: {selector: {}, paused: true}\n")
	repo.WriteFile("devices/cam-017/device.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"+
		"  models:\n    - {name: m, ref: "+reg.Ref("models/m")+", policy: {semver: \">=1.0.0\"}}\n")
	commit := repo.Commit("follow m by semver")
	n := newNode(t, repo.Dir(), "--insecure-registry", reg.Host)
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	reg.PushFiles(t, "models/m:1.1.0", map[string][]byte{"model.onnx": []byte("two")})
	out, errOut, code := n.tend("plan", "--detailed-exitcode")
	require.Equal(t, 0, code, errOut+out)
	require.Contains(t, errOut, "Release of model/m at HEAD@sha1:"+commit+" held: rollout paused; the plan keeps the applied digests and reverts drift only\n")
	require.Contains(t, out, "No changes: the device matches its declaration.")
}
