package manifest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// A ${…} that tend leaves as it is is a mistyped expansion when it is a
// bare name or a name, a colon and a word; shell syntax is left alone.
func TestMistyped(t *testing.T) {
	for ref, want := range map[string]bool{
		"batch": true, "HOME": true, "batch.size": true, "lable:site": true, "vars:batch": true, "flie:/etc/x": true, "device:x": true,
		"device": false, "replica": false, "var:batch": false, "var:-x": false, "label:site": false, "model:m": false, "file:/etc/x": false,
		"x:-1": false, "x-1": false, "#x": false, "!x": false, "x%.*": false, "x/a/b": false, "1": false, "x:1:2": false, "x: -1": false, "": false,
	} {
		require.Equal(t, want, mistyped(ref), ref)
	}
}

func warningLines(ws []*Error) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Error())
	}
	return out
}

// A reference that looks like a mistyped expansion is a warning at its
// field (or at the variable whose value holds it), with what was likely
// meant; an escaped one ($${…}) and shell syntax are not; in a field
// where validation refuses it, the error says it alone.
func TestComposeWarnsOnMistypedReferences(t *testing.T) {
	in := files("p.yaml", profile("p", `  selector: {}
  vars: {batch: "8", cmd: "run ${lable:site}"}
  files:
    - path: /etc/infer/a
      content: "${batch} $${batch} ${var:-x} ${LANG:-C} ${var:cmd} ${var:cmd}"
    - path: /etc/infer/b
      content: "${HOME}"
  services:
    - {name: s, command: [/bin/x, "${batch}"]}
`))
	c, err := Compose(in, ComposeOptions{Device: "cam-017", ValidateOptions: allow})
	var ce *ComposeError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []string{`p.yaml:13: spec.services[0].command[1]: unknown reference "batch": use model:NAME, file:PATH or (in command and env) ${replica}; a variable is ${var:NAME}, a label ${label:KEY}`},
		warningLines(ce.Errs))
	require.Nil(t, c)
	require.Equal(t, []string{"profile/p"}, ce.Profiles)
	tail := " (tend expands ${var:NAME}, ${device} and ${label:KEY}, and in a service ${model:NAME}, ${file:PATH} and ${replica}); write $${…} for a literal ${…}"
	require.Equal(t, []string{
		"p.yaml:6: spec.vars.cmd: var/cmd: ${lable:site} is not an expansion tend knows: it is left as it is" + tail,
		"p.yaml:9: spec.files[0].content: file/etc/infer/a: ${batch} (did you mean ${var:batch}?) is not an expansion tend knows: it is left as it is" + tail,
		"p.yaml:11: spec.files[1].content: file/etc/infer/b: ${HOME} is not an expansion tend knows: it is left as it is" + tail,
	}, warningLines(ce.Warnings), "once each, the variable's at the variable")

	// Without the service, the device is valid and carries the warnings.
	in = files("p.yaml", profile("p", "  selector: {}\n  files: [{path: /etc/infer/a, content: \"${batch}\"}]\n"))
	c, err = Compose(in, ComposeOptions{Device: "cam-017", ValidateOptions: allow})
	require.NoError(t, err)
	require.Len(t, c.Warnings, 1)
	require.Equal(t, c.Warnings, c.Device.Warnings)
	require.Equal(t, "/etc/infer/a", c.Device.Spec.Files[0].Path)
	require.Equal(t, "${batch}", c.Device.Spec.Files[0].Content, "left as it is")
}

// An undefined variable or label names a likely typo, and no list of
// what the device has: the same line of a profile reads the same on
// every device it fails on.
func TestUndefinedSuggests(t *testing.T) {
	in := files("p.yaml", profile("p", "  selector: {}\n  vars: {threshold: \"1\"}\n  files: [{path: /etc/infer/a, content: \"${var:treshold} ${label:stie}\"}]\n"))
	_, err := Compose(in, ComposeOptions{Device: "cam-017", Labels: map[string]string{"site": "a"}, ValidateOptions: allow})
	require.EqualError(t, err, "p.yaml:7: spec.files[0].content: file/etc/infer/a: ${var:treshold} is not defined: no profile that applies to this device sets it (did you mean ${var:threshold}?); add it to a profile's vars\n"+
		"p.yaml:7: spec.files[0].content: file/etc/infer/a: ${label:stie} is not defined: the device has no label \"stie\" (did you mean ${label:site}?); "+
		"set it in the agent config's labels or the Device document")
	require.True(t, errors.Is(err, ErrInvalid))
}

// CheckFleet checks every document: each device, with the profiles its
// labels select even when it is invalid; each profile with the devices
// it applies to, or on its own; each rollout with the devices it governs.
func TestCheckFleet(t *testing.T) {
	in := files(
		"profiles/orin.yaml", profile("orin", "  selector: {matchLabels: {hw: orin}}\n  files: [{path: /etc/infer/a, content: \"${var:nope}\"}]\n"),
		"profiles/all.yaml", profile("all", "  selector: {}\n  vars: {port: \"8080\"}\n"),
		"profiles/edge.yaml", profile("edge", `  selector: {matchLabels: {tier: edge}}
  vars: {url: "http://${label:ip}:${var:port}/"}
  models: [{name: m, ref: "r.local/m:v1", path: /opt/models/m}]
  files:
    - {path: /etc/infer/edge, content: "${device} ${var:port} ${var:url}"}
    - {path: relative/x, content: x}
  services:
    - name: s
      command: [/bin/x, "${model:m}", "${model:elsewhere}", "${file:/etc/infer/edge}", "${var:url}"]
      health: {tcp: "127.0.0.1:${label:port}"}
    - name: t
      command: [/bin/y, "${var:missing}"]
      health: {http: "http://127.0.0.1:${var:port}/x"}
`),
		"profiles/rollout.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: r}\nspec:\n  selector: {matchLabels: {hw: orin}}\n",
		"devices/a.yaml", device("cam-1", "hw: orin", "  files: [{path: /etc/infer/b, content: b}]\n"),
		"devices/b.yaml", device("cam-2", "hw: x86", "  files: [{path: /etc/infer/b, content: b}]\n"),
	)
	f, err := CheckFleet(in, allow)
	require.NoError(t, err)
	require.Len(t, f.Devices, 2)

	d := f.Devices[0]
	require.Equal(t, "cam-1", d.Name)
	require.Nil(t, d.Composed)
	require.EqualError(t, d.Err, "profiles/orin.yaml:6: spec.files[0].content: file/etc/infer/a: ${var:nope} is not defined: no profile that applies to this device sets it; add it to a profile's vars")
	require.Equal(t, []string{"profile/all", "profile/orin"}, d.Profiles)
	require.Equal(t, map[string]string{"hw": "orin"}, d.Labels)
	require.NoError(t, f.Devices[1].Err)
	require.Equal(t, []string{"profile/all"}, f.Devices[1].Profiles)

	var summary []string
	for _, p := range f.Profiles {
		summary = append(summary, fmt.Sprintf("%s %v alone=%v", p.Profile.Metadata.Name, p.Devices, p.Alone))
	}
	require.Equal(t, []string{"all [cam-1 cam-2] alone=false", "edge [] alone=true", "orin [cam-1] alone=false"}, summary)

	// On its own: the device's name, its labels and what other profiles
	// set or declare are not known (their fields are left unchecked);
	// what the profile alone gets wrong is reported, at file:line.
	edge := f.Profiles[1]
	require.Empty(t, edge.Warnings)
	require.EqualError(t, edge.Err, `profiles/edge.yaml:10: spec.files[1].path: "relative/x" is relative: use an absolute path such as /etc/infer/config.yaml`+"\n"+
		`profiles/edge.yaml:16: spec.services[1].command[1]: service/t: ${var:missing} is not defined: no profile of the files given sets it; add it to a profile's vars`)

	require.Len(t, f.Rollouts, 1)
	require.Equal(t, []string{"cam-1"}, f.Rollouts[0].Devices)
}

// A document that does not parse fails the whole check, naming it.
func TestCheckFleetParseErrors(t *testing.T) {
	_, err := CheckFleet(files("p.yaml", profile("p", "  selector: {matchExpressions: [{key: a, operator: Is}]}\n")), allow)
	require.EqualError(t, err, `p.yaml:5: spec.selector.matchExpressions[0].operator: unknown operator "Is": use In, NotIn, Exists or DoesNotExist`)
}
