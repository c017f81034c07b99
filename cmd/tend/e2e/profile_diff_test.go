package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// profileFleetRepo is a fleet of profiles (profiles/) and three inventory
// devices (devices/{device}); at HEAD the orin profile raises its
// threshold and adds a file, and edge-only, which selects no device in
// Git, changes too.
func profileFleetRepo(t *testing.T) (*testgit.Repo, string) {
	r := testgit.NewRepo(t)
	orin := func(threshold, extra string) string {
		return "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: orin-inference}\nspec:\n  selector: {matchLabels: {hw: orin}}\n" +
			"  vars: {threshold: \"" + threshold + "\"}\n  files:\n    - path: /etc/infer/config.yaml\n      content: \"threshold: ${var:threshold}\\n\"\n" + extra
	}
	edge := func(content string) string {
		return "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: edge-only}\nspec:\n  selector: {matchLabels: {tier: edge}}\n" +
			"  files: [{path: /etc/edge, content: " + content + "}]\n"
	}
	r.WriteFile("profiles/orin.yaml", orin("0.4", ""))
	r.WriteFile("profiles/edge.yaml", edge("one"))
	for _, d := range []struct{ name, hw string }{{"cam-001", "orin"}, {"cam-002", "orin"}, {"cam-003", "x86"}} {
		r.WriteFile("devices/"+d.name+"/device.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata:\n  name: "+d.name+
			"\n  labels: {hw: "+d.hw+"}\nspec:\n  files: [{path: /etc/infer/name, content: "+d.name+"}]\n")
	}
	r.Commit("fleet")
	r.WriteFile("profiles/orin.yaml", orin("0.5", "    - {path: /etc/infer/labels.txt, content: person}\n"))
	r.WriteFile("profiles/edge.yaml", edge("two"))
	r.Commit("orin threshold 0.5")
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nsource:\n  url: "+r.Dir()+
		"\n  paths: [profiles, \"devices/{device}\"]\n"), 0o644))
	return r, cfg
}

// TestDiffProfileChangeMarkdown: the pull-request comment of a profile
// change names the profile behind each action and the devices it reaches.
func TestDiffProfileChangeMarkdown(t *testing.T) {
	r, cfg := profileFleetRepo(t)
	out, errOut, code := tend(t, "diff", "--config", cfg, "--base", "HEAD~1", "--head", "HEAD", "--format", "markdown", "--log-format", "text")
	require.Equal(t, 2, code, "changes exit 2: %s", errOut)
	golden.Assert(t, "diff-profile.md.golden", []byte(stableDiff(out, map[string]string{r.Dir(): "<repo>"})))
}

// TestValidateAllProfiles: validate --all checks the profiles and every
// inventory device, and still checks the profiles of a fleet with no
// device folder.
func TestValidateAllProfiles(t *testing.T) {
	r, cfg := profileFleetRepo(t)
	out, errOut, code := tend(t, "validate", "--all", "--config", cfg, "--log-format", "text")
	require.Equal(t, 0, code, errOut)
	golden.Assert(t, "validate-all-profiles.golden", []byte(stable(out, map[string]string{r.Dir(): "<repo>"})))

	r.WriteFile("profiles/edge.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: edge-only}\nspec:\n  selector: {matchExpressions: [{key: tier, operator: Is}]}\n")
	r.Remove("devices")
	r.Commit("no device folders, and a typo")
	out, errOut, code = tend(t, "validate", "--all", "--config", cfg, "--log-format", "text")
	require.Equal(t, 1, code)
	require.Contains(t, out, `profiles/edge.yaml:5: spec.selector.matchExpressions[0].operator: unknown operator "Is"`)
	require.Contains(t, out, "no device with a Device document at HEAD: devices known only by their agent config labels cannot be checked from Git")
	require.Contains(t, errOut, "the profiles of the shared source paths are invalid")
}
