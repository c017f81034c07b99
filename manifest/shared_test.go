package manifest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSharedComposeIsCompose: composing a device from its own files and
// shared files parsed once gives what Compose gives from both together,
// result or errors, however many devices share them.
func TestSharedComposeIsCompose(t *testing.T) {
	orin := profile("orin", "  selector: {matchLabels: {hw: orin}}\n  vars: {t: \"0.4\"}\n  files: [{path: /etc/infer/orin, content: \"${var:t} ${device}\"}]\n")
	all := profile("all", "  selector: {}\n  priority: -1\n  files: [{path: /etc/infer/orin, content: base}, {path: /etc/infer/all, content: all}]\n")
	cases := []struct {
		name        string
		own, shared []Input
		device      string
		labels      map[string]string
	}{
		{"profiles and a device folder", files("devices/cam-017/d.yaml", device("cam-017", "hw: orin", "  files: [{path: /etc/infer/own, content: own}]\n")),
			files("profiles/orin.yaml", orin, "profiles/all.yaml", all), "cam-017", nil},
		{"a Device document in a profile file", nil,
			files("profiles/orin.yaml", orin+"---\n"+device("cam-017", "hw: orin", "  files: [{path: /etc/infer/d, content: d}]\n")+"---\n"+device("cam-018", "", "  files: [{path: /x, content: [broken}]\n")), "cam-017", nil},
		{"agent config labels only", nil, files("profiles/orin.yaml", orin), "cam-001", map[string]string{"hw": "orin"}},
		{"a Device document of another file", files("devices/cam-017/d.yaml", device("cam-017", "hw: orin", "  files: []\n")),
			files("profiles/orin.yaml", orin, "common/d.yaml", device("cam-017", "", "  files: [{path: /etc/infer/c, content: c}]\n")), "cam-017", nil},
		{"nothing matches", nil, files("profiles/orin.yaml", orin), "cam-001", nil},
		{"a broken profile", nil, files("profiles/orin.yaml", orin, "profiles/bad.yaml", profile("bad", "  selector: {matchExpressions: [{key: a, operator: Is}]}\n")), "cam-001", map[string]string{"hw": "orin"}},
		{"a profile name twice", files("devices/cam-017/p.yaml", orin), files("profiles/orin.yaml", orin), "cam-017", map[string]string{"hw": "orin"}},
		{"an undefined variable", nil, files("profiles/orin.yaml", profile("v", "  selector: {}\n  files: [{path: /etc/infer/v, content: \"${var:nope}\"}]\n")), "cam-001", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := ComposeOptions{Device: tc.device, Labels: tc.labels, ValidateOptions: allow}
			want, wantErr := Compose(append(append([]Input(nil), tc.own...), tc.shared...), opts)
			s := ParseShared(tc.shared)
			for range 2 { // parsed once, composed twice: nothing of the first leaks
				got, err := s.Compose(tc.own, opts)
				if wantErr != nil {
					require.Error(t, err)
					require.ElementsMatch(t, errLines(wantErr), errLines(err))
					continue
				}
				require.NoError(t, err)
				require.Equal(t, want.Device, got.Device)
				require.Equal(t, want.Resources, got.Resources)
				require.Equal(t, want.Layers, got.Layers)
			}
		})
	}
}

// TestSharedDevicesDoNotLeak: the expansion of one device does not reach
// the next composed from the same parsed profiles.
func TestSharedDevicesDoNotLeak(t *testing.T) {
	s := ParseShared(files("profiles/p.yaml", profile("p", "  selector: {}\n  services: [{name: infer, command: [\"/bin/run\", \"${device}\"]}]\n")))
	for _, name := range []string{"cam-001", "cam-002"} {
		c, err := s.Compose(nil, ComposeOptions{Device: name})
		require.NoError(t, err)
		require.Equal(t, []string{"/bin/run", name}, c.Device.Spec.Services[0].Command)
	}
}

func TestSharedErr(t *testing.T) {
	s := ParseShared(files(
		"profiles/a.yaml", profile("a", "  selector: {matchExpressions: [{key: a, operator: Is}]}\n"),
		"profiles/b.yaml", profile("b", "  selector: {}\n"),
		"profiles/c.yaml", profile("b", "  selector: {}\n"),
		"devices/x.yaml", "not: a profile\n",
	))
	require.Len(t, s.Profiles(), 2)
	err := s.Err()
	require.ErrorContains(t, err, `profiles/a.yaml:5: spec.selector.matchExpressions[0].operator: unknown operator "Is"`)
	require.ErrorContains(t, err, "profiles/c.yaml:3: metadata.name: profile/b is declared twice (first at profiles/b.yaml:3)")
	require.NotContains(t, err.Error(), "devices/x.yaml", "a file without a profile is every device's own business")
}

func errLines(err error) []string {
	var out []string
	for _, e := range AsErrors(err) {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

// A shared file may hold a Rollout next to a Profile: it governs the
// devices composed from the shared files, as when every file is composed
// together, and a rollout name used twice is reported once.
func TestSharedRollouts(t *testing.T) {
	both := profile("all", "  selector: {}\n  files: [{path: /etc/infer/a, content: a}]\n") +
		"---\napiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec: {selector: {}, paused: true}\n"
	shared := ParseShared(files("profiles/all.yaml", both))
	require.NoError(t, shared.Err())
	c, err := shared.Compose(files("devices/cam-017/d.yaml", device("cam-017", "hw: orin", "")), ComposeOptions{Device: "cam-017"})
	require.NoError(t, err)
	require.NotNil(t, c.Rollout)
	require.True(t, c.Rollout.Spec.Paused)

	twice := ParseShared(files("profiles/all.yaml", both, "profiles/again.yaml",
		"apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec: {selector: {}}\n"))
	require.ErrorContains(t, twice.Err(), "rollout/default is declared twice")
}
