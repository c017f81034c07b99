package diff_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

var profilePaths = diff.Options{Paths: []string{"profiles", "devices/{device}"}}

// profileDoc is a Profile document; spec is its spec's lines.
func profileDoc(name, spec string) string {
	return "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: " + name + "}\nspec:\n" + spec
}

// labelled is a Device document with labels and spec lines.
func labelled(name, labels, spec string) string {
	return "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: " + name + ", labels: {" + labels + "}}\nspec:\n" + spec
}

// profileFleet is three inventory devices (two orin, one x86; cam-002
// sets its own config) and four profiles, one selecting no device in
// Git. At head orin-inference raises its threshold, adds a file and
// removes one the base profile declares; edge-only changes; x86 changes
// its priority alone.
func profileFleet(t *testing.T) (r *testgit.Repo, base, head string) {
	r = testgit.NewRepo(t)
	r.WriteFile("profiles/base.yaml", profileDoc("base", "  selector: {}\n  priority: -10\n  files:\n    - {path: /etc/infer/old, content: old}\n    - {path: /etc/motd, content: \"${device}\"}\n"))
	orin := func(threshold, extra string) string {
		return profileDoc("orin-inference", "  selector: {matchLabels: {hw: orin}}\n  vars: {threshold: \""+threshold+"\"}\n  files:\n"+
			"    - path: /etc/infer/config.yaml\n      content: \"threshold: ${var:threshold}\"\n"+extra)
	}
	r.WriteFile("profiles/orin.yaml", orin("0.4", ""))
	r.WriteFile("profiles/edge.yaml", profileDoc("edge-only", "  selector: {matchLabels: {tier: edge}}\n  files: [{path: /etc/edge, content: one}]\n"))
	r.WriteFile("profiles/x86.yaml", profileDoc("x86", "  selector: {matchLabels: {hw: x86}}\n  files: [{path: /etc/infer/x86, content: x86}]\n"))
	r.WriteFile("devices/cam-001/device.yaml", labelled("cam-001", "hw: orin", "  files: []\n"))
	r.WriteFile("devices/cam-002/device.yaml", labelled("cam-002", "hw: orin", "  files: [{path: /etc/infer/config.yaml, content: own}]\n"))
	r.WriteFile("devices/cam-003/device.yaml", labelled("cam-003", "hw: x86", "  files: []\n"))
	base = r.Commit("fleet")
	r.WriteFile("profiles/orin.yaml", orin("0.5", "    - {path: /etc/infer/labels.txt, content: person}\n    - {path: /etc/infer/old, absent: true}\n"))
	r.WriteFile("profiles/edge.yaml", profileDoc("edge-only", "  selector: {matchLabels: {tier: edge}}\n  files: [{path: /etc/edge, content: two}]\n"))
	r.WriteFile("profiles/x86.yaml", profileDoc("x86", "  selector: {matchLabels: {hw: x86}}\n  priority: 5\n  files: [{path: /etc/infer/x86, content: x86}]\n"))
	head = r.Commit("profiles change")
	return r, base, head
}

func TestRunProfileChange(t *testing.T) {
	r, base, head := profileFleet(t)
	res, err := diff.Run(context.Background(), open(t, r), base, head, profilePaths)
	require.NoError(t, err)
	require.Equal(t, map[string]diff.Status{"cam-001": diff.Changed, "cam-002": diff.Changed}, names(res.Devices))
	require.Equal(t, 1, res.Unchanged)

	t.Run("each action names the layer behind it", func(t *testing.T) {
		got := map[string]string{}
		for _, a := range res.Devices[0].Plan.Actions {
			got[a.Resource] = a.Origin
		}
		require.Equal(t, map[string]string{
			"file/etc/infer/config.yaml": "profile/orin-inference",
			"file/etc/infer/labels.txt":  "profile/orin-inference",
			"file/etc/infer/old":         "profile/orin-inference", // the layer that removed it
		}, got)
		a := res.Devices[0].Plan.Actions[0]
		require.Equal(t, "profiles/orin.yaml", a.OriginFile)
		require.NotZero(t, a.OriginLine)
	})
	t.Run("each changed profile lists the devices it reaches", func(t *testing.T) {
		require.Equal(t, []diff.ProfileChange{
			{Name: "profile/edge-only", Change: "changed", Devices: []string{}, Applies: 0},
			{Name: "profile/orin-inference", Change: "changed", Devices: []string{"cam-001", "cam-002"}, Applies: 2},
			{Name: "profile/x86", Change: "changed", Devices: []string{}, Applies: 1},
		}, res.Profiles)
	})
	t.Run("text, JSON and markdown", func(t *testing.T) {
		res.Base, res.Head = diff.Revision{Name: "main"}, diff.Revision{Name: "change"}
		var txt, md, js bytes.Buffer
		require.NoError(t, diff.WriteText(&txt, res))
		require.NoError(t, diff.WriteMarkdown(&md, res, diff.MarkdownOptions{}))
		require.NoError(t, diff.WriteJSON(&js, res))
		require.True(t, json.Valid(js.Bytes()))
		golden.Assert(t, "profiles.txt.golden", commits.ReplaceAll(txt.Bytes(), []byte("<commit>")))
		golden.Assert(t, "profiles.md.golden", commits.ReplaceAll(md.Bytes(), []byte("<commit>")))
		golden.Assert(t, "profiles.json.golden", commits.ReplaceAll(js.Bytes(), []byte("<commit>")))
	})
}

// TestRunProfileAddedAndRemoved: a profile added reaches the devices it
// selects; one removed, those it applied to.
func TestRunProfileAddedAndRemoved(t *testing.T) {
	r, _, _ := profileFleet(t)
	r.Remove("profiles/x86.yaml")
	r.WriteFile("profiles/new.yaml", profileDoc("gpu", "  selector: {matchLabels: {hw: orin}}\n  files: [{path: /etc/gpu, content: on}]\n"))
	head := r.Commit("x86 goes, gpu comes")
	res, err := diff.Run(context.Background(), open(t, r), "HEAD~1", head, profilePaths)
	require.NoError(t, err)
	require.Equal(t, []diff.ProfileChange{
		{Name: "profile/gpu", Change: "added", Devices: []string{"cam-001", "cam-002"}, Applies: 2},
		{Name: "profile/x86", Change: "removed", Devices: []string{"cam-003"}, Applies: 1},
	}, res.Profiles)
	for _, d := range res.Devices {
		for _, a := range d.Plan.Actions {
			require.NotEmpty(t, a.Origin, "%s %s", d.Name, a.Resource)
		}
	}
}

// TestRunProfileReachesNoDevice: with no device folder at all (every
// device known only by its agent config labels), a profile change is
// still reported.
func TestRunProfileReachesNoDevice(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("profiles/edge.yaml", profileDoc("edge-only", "  selector: {matchLabels: {tier: edge}}\n  files: [{path: /etc/edge, content: one}]\n"))
	r.WriteFile("devices/README.md", "devices are known by their labels")
	base := r.Commit("fleet")
	r.WriteFile("profiles/edge.yaml", profileDoc("edge-only", "  selector: {matchLabels: {tier: edge}}\n  files: [{path: /etc/edge, content: two}]\n"))
	head := r.Commit("edge changes")
	res, err := diff.Run(context.Background(), open(t, r), base, head, profilePaths)
	require.NoError(t, err)
	require.Empty(t, res.Devices)
	require.Equal(t, []diff.ProfileChange{{Name: "profile/edge-only", Change: "changed", Devices: []string{}}}, res.Profiles)
	var txt bytes.Buffer
	require.NoError(t, diff.WriteText(&txt, res))
	require.Contains(t, txt.String(), "profile/edge-only reaches no device with a Device document in Git (it may still match devices known only by their agent config labels)")
}

// TestValidateProfiles: validate --all checks every profile once and says
// which inventory devices each applies to, also with no device folder.
func TestValidateProfiles(t *testing.T) {
	r, _, _ := profileFleet(t)
	ctx := context.Background()
	checked, err := diff.Validate(ctx, open(t, r), "HEAD", profilePaths)
	require.NoError(t, err)
	require.Len(t, checked, 3)
	for _, c := range checked {
		require.NoError(t, c.Err, c.Name)
	}
	profiles, err := diff.ValidateProfiles(ctx, open(t, r), "HEAD", profilePaths, checked)
	require.NoError(t, err)
	reach := map[string][]string{}
	for _, p := range profiles {
		require.Equal(t, 3, p.Line, "%s: metadata.name's line", p.Name)
		reach[p.Name] = p.Devices
	}
	require.Equal(t, map[string][]string{
		"profile/base":           {"cam-001", "cam-002", "cam-003"},
		"profile/edge-only":      nil,
		"profile/orin-inference": {"cam-001", "cam-002"},
		"profile/x86":            {"cam-003"},
	}, reach)

	t.Run("a broken profile is reported once, with file and line", func(t *testing.T) {
		r.WriteFile("profiles/edge.yaml", profileDoc("edge-only", "  selector: {matchExpressions: [{key: tier, operator: Is, values: [edge]}]}\n"))
		r.Commit("typo")
		_, err := diff.ValidateProfiles(ctx, open(t, r), "HEAD", profilePaths, nil)
		require.ErrorContains(t, err, `profiles/edge.yaml:5: spec.selector.matchExpressions[0].operator: unknown operator "Is"`)
	})
	t.Run("devices without a folder of their own", func(t *testing.T) {
		r.Remove("devices")
		r.WriteFile("profiles/edge.yaml", profileDoc("edge-only", "  selector: {matchLabels: {tier: edge}}\n"))
		r.Commit("devices known by their labels only")
		checked, err := diff.Validate(ctx, open(t, r), "HEAD", profilePaths)
		require.NoError(t, err)
		require.Empty(t, checked)
		profiles, err := diff.ValidateProfiles(ctx, open(t, r), "HEAD", profilePaths, checked)
		require.NoError(t, err)
		require.Len(t, profiles, 4)
	})
	t.Run("a missing profiles folder", func(t *testing.T) {
		_, err := diff.ValidateProfiles(ctx, open(t, r), "HEAD", diff.Options{Paths: []string{"profile", "devices/{device}"}}, nil)
		require.ErrorContains(t, err, `source path "profile" not found at HEAD`)
	})
}
