package diff_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/rollout"
)

var rolloutPaths = diff.Options{Paths: []string{"fleet", "devices/{device}"}}

// rolloutDoc is a Rollout document; spec is its spec's lines.
func rolloutDoc(name, spec string) string {
	return "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: " + name + "}\nspec:\n" + spec
}

// bucketed is the first name prefix-N whose bucket is in [lo, hi).
func bucketed(t *testing.T, prefix string, lo, hi int) string {
	t.Helper()
	for i := range 1000 {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if b := rollout.Bucket(name); b >= lo && b < hi {
			return name
		}
	}
	t.Fatalf("no %s-N with a bucket in [%d, %d)", prefix, lo, hi)
	return ""
}

// rolloutFleet is devices of three sites, each governed by its own
// rollout, and one no rollout governs. Site a has a three-wave rollout
// with a gate: a canary by selector, a device in each percent wave, one
// past the last percent, one added and one removed at head. Site b's
// rollout has a window; site c's is paused at head (not at base: the
// Rollout at head governs). Every device's file changes at head. names
// maps each role (the name with its number cut) to its device's name.
func rolloutFleet(t *testing.T) (r *testgit.Repo, names map[string]string) {
	r = testgit.NewRepo(t)
	names = map[string]string{
		"a-canary":  "a-canary",
		"b-wave1":   bucketed(t, "b-wave1", 0, 10),
		"c-wave2":   bucketed(t, "c-wave2", 10, 50),
		"d-nowave":  bucketed(t, "d-nowave", 50, 100),
		"e-added":   "e-added",
		"g-removed": "g-removed",
		"n-night":   "n-night",
		"p-paused":  "p-paused",
		"z-free":    "z-free",
	}
	labels := map[string]string{
		"a-canary": "site: a, ring: canary", "b-wave1": "site: a", "c-wave2": "site: a", "d-nowave": "site: a",
		"e-added": "site: a, ring: canary", "g-removed": "site: a", "n-night": "site: b", "p-paused": "site: c", "z-free": "hw: x86",
	}
	write := func(role, content string) {
		n := names[role]
		r.WriteFile("devices/"+n+"/device.yaml", labelled(n, labels[role], "  files: [{path: /etc/infer/config.yaml, content: \""+content+"\"}]\n"))
	}
	defaults := rolloutDoc("default", "  selector: {matchLabels: {site: a}}\n  waves:\n"+
		"    - selector: {matchLabels: {ring: canary}}\n    - {percent: 10, after: 1h}\n    - {percent: 50, after: 6h}\n"+
		"  gate: {url: \"https://ci:s3cret@gate.example.com/ok?wave={wave}\"}\n")
	r.WriteFile("fleet/default.yaml", defaults)
	r.WriteFile("fleet/night.yaml", rolloutDoc("night", "  selector: {matchLabels: {site: b}}\n  waves: [{percent: 100}]\n"+
		"  window: {schedule: \"0 2 * * *\", duration: 3h, timeZone: Europe/Berlin}\n"))
	frozen := func(paused bool) string {
		return rolloutDoc("frozen", fmt.Sprintf("  selector: {matchLabels: {site: c}}\n  waves: [{percent: 100, after: 90m}]\n  paused: %t\n", paused))
	}
	r.WriteFile("fleet/frozen.yaml", frozen(false))
	for role := range names {
		if role != "e-added" {
			write(role, "v1")
		}
	}
	r.Commit("fleet")
	for role := range names {
		if role != "g-removed" {
			write(role, "v2")
		}
	}
	r.Remove("devices/g-removed")
	r.WriteFile("fleet/frozen.yaml", frozen(true))
	r.Commit("v2 everywhere, site c paused")
	return r, names
}

var buckets = regexp.MustCompile(`bucket \d+( is|\))`)

// byRole writes out with each device's name replaced by its role, so a
// golden file does not depend on which names the hash put in each wave.
func byRole(out []byte, names map[string]string) []byte {
	for role, n := range names {
		out = bytes.ReplaceAll(out, []byte(n), []byte(role))
	}
	return buckets.ReplaceAll(commits.ReplaceAll(out, []byte("<commit>")), []byte("bucket <n>$1"))
}

func TestRunRollouts(t *testing.T) {
	r, names := rolloutFleet(t)
	res, err := diff.Run(context.Background(), open(t, r), "HEAD~1", "HEAD", rolloutPaths)
	require.NoError(t, err)
	require.Len(t, res.Devices, len(names))
	res.Base, res.Head = diff.Revision{Name: "main"}, diff.Revision{Name: "change"}
	bucket := func(role string) int { return rollout.Bucket(names[role]) }

	t.Run("text", func(t *testing.T) {
		var txt bytes.Buffer
		require.NoError(t, diff.WriteText(&txt, res))
		want := map[string]string{
			"a-canary": "Rollout: wave 0 of rollout/default (selector ring=canary), at once, if the gate answers 200",
			"b-wave1":  fmt.Sprintf("Rollout: wave 1 of rollout/default (10%%, bucket %d), opens 1h after the device sees the release, if the gate answers 200", bucket("b-wave1")),
			"c-wave2":  fmt.Sprintf("Rollout: wave 2 of rollout/default (50%%, bucket %d), opens 6h after the device sees the release, if the gate answers 200", bucket("c-wave2")),
			"d-nowave": fmt.Sprintf("Rollout: in no wave of rollout/default (bucket %d is past the last percent, 50): held", bucket("d-nowave")),
			"e-added":  "Rollout: wave 0 of rollout/default (selector ring=canary), but an added device has applied nothing: it takes its first commit at once",
			"n-night":  fmt.Sprintf("Rollout: wave 0 of rollout/night (100%%, bucket %d), inside the window 0 2 * * * for 3h (Europe/Berlin)", bucket("n-night")),
			"p-paused": fmt.Sprintf("Rollout: wave 0 of rollout/frozen (100%%, bucket %d), paused: held until a commit sets paused: false", bucket("p-paused")),
		}
		for _, section := range strings.Split(txt.String(), "\n=== ")[1:] {
			device, _, _ := strings.Cut(section, ":")
			role := ""
			for ro, n := range names {
				if n == device {
					role = ro
				}
			}
			require.NotEmpty(t, role, device)
			var got []string
			for _, line := range strings.Split(section, "\n") {
				if strings.HasPrefix(line, "Rollout:") {
					got = append(got, line)
				}
			}
			if w, ok := want[role]; ok {
				require.Equal(t, []string{w}, got, role)
			} else {
				require.Empty(t, got, "%s: a removed device, or one no rollout governs, has no rollout line", role)
			}
		}
		golden.Assert(t, "rollouts.txt.golden", byRole(txt.Bytes(), names))
	})

	t.Run("JSON", func(t *testing.T) {
		var js bytes.Buffer
		require.NoError(t, diff.WriteJSON(&js, res))
		var got struct {
			Devices []struct {
				Device  string         `json:"device"`
				Status  string         `json:"status"`
				Rollout map[string]any `json:"rollout"`
			} `json:"devices"`
		}
		require.NoError(t, json.Unmarshal(js.Bytes(), &got))
		rollouts := map[string]map[string]any{}
		for _, d := range got.Devices {
			if d.Rollout != nil {
				rollouts[d.Device] = d.Rollout
			}
		}
		gate := map[string]any{"url": "https://gate.example.com/ok?wave={wave}"}
		entry := func(role, name string, wave int, after string, paused bool) map[string]any {
			return map[string]any{"name": name, "wave": float64(wave), "bucket": float64(bucket(role)), "after": after, "paused": paused}
		}
		withGate := func(m map[string]any) map[string]any { m["gate"] = gate; return m }
		added := withGate(entry("e-added", "rollout/default", 0, "0s", false))
		added["added"] = true
		night := entry("n-night", "rollout/night", 0, "0s", false)
		night["window"] = map[string]any{"schedule": "0 2 * * *", "duration": "3h0m0s", "timeZone": "Europe/Berlin"}
		require.Equal(t, map[string]map[string]any{
			names["a-canary"]: withGate(entry("a-canary", "rollout/default", 0, "0s", false)),
			names["b-wave1"]:  withGate(entry("b-wave1", "rollout/default", 1, "1h0m0s", false)),
			names["c-wave2"]:  withGate(entry("c-wave2", "rollout/default", 2, "6h0m0s", false)),
			names["d-nowave"]: withGate(entry("d-nowave", "rollout/default", rollout.NoWave, "0s", false)),
			names["e-added"]:  added,
			names["n-night"]:  night,
			names["p-paused"]: entry("p-paused", "rollout/frozen", 0, "1h30m0s", true),
		}, rollouts)
		require.NotContains(t, js.String(), "s3cret", "the gate's credentials are not printed")
	})

	t.Run("markdown", func(t *testing.T) {
		var md bytes.Buffer
		require.NoError(t, diff.WriteMarkdown(&md, res, diff.MarkdownOptions{}))
		out := md.String()
		require.Contains(t, out, "Rollout `rollout/default`: 5 changed devices.\n\n"+
			"| wave | who | opens | changed devices |\n|--:|:--|:--|--:|\n"+
			"| 0 | selector ring=canary | at once | 2 |\n"+
			"| 1 | 10% | 1h after the device sees the release | 1 |\n"+
			"| 2 | 50% | 6h after the device sees the release | 1 |\n"+
			"| none | bucket 50 or more, past the last percent | held | 1 |\n")
		require.Contains(t, out, "- **Paused**: no device takes this change until a commit sets `paused: false`.")
		require.Contains(t, out, "inside the window `0 2 * * *` for 3h (Europe/Berlin)")
		require.Contains(t, out, "No rollout governs 1 changed device: it takes the change at its next tick.")
		require.Less(t, strings.Index(out, "Rollout `rollout/default`"), strings.Index(out, "Rollout `rollout/frozen`"))
		require.Less(t, strings.Index(out, "Rollout `rollout/frozen`"), strings.Index(out, "Rollout `rollout/night`"))
		golden.Assert(t, "rollouts.md.golden", byRole(md.Bytes(), names))
	})
}

// TestRunRolloutChanges: a commit that changes Rollout documents only
// changes no device's plan, and diff shows each changed rollout — what
// changed in its spec and the devices it governs, gained and lost — in
// text, markdown and JSON, and counts it as a change.
func TestRunRolloutChanges(t *testing.T) {
	r, names := rolloutFleet(t)
	// default narrows to the canaries, in one wave, with another gate
	// password, staging on release; night pauses and moves its window;
	// frozen goes; spare comes and governs no device; z-free's folder gets
	// a rollout of its own.
	r.WriteFile("fleet/default.yaml", rolloutDoc("default", "  selector: {matchLabels: {site: a, ring: canary}}\n  waves: [{percent: 100, after: 2h}]\n"+
		"  gate: {url: \"https://ci:other@gate.example.com/ok?wave={wave}\"}\n  stage: onRelease\n"))
	r.WriteFile("fleet/night.yaml", rolloutDoc("night", "  selector: {matchLabels: {site: b}}\n  waves: [{percent: 100}]\n  paused: true\n"+
		"  window: {schedule: \"0 3 * * *\", duration: 3h, timeZone: Europe/Berlin}\n"))
	r.Remove("fleet/frozen.yaml")
	r.WriteFile("fleet/spare.yaml", rolloutDoc("spare", "  selector: {matchLabels: {site: q}}\n"))
	r.WriteFile("devices/"+names["z-free"]+"/rollout.yaml", rolloutDoc("solo", "  selector: {matchLabels: {hw: x86}}\n"))
	r.Commit("rollouts only")

	res, err := diff.Run(context.Background(), open(t, r), "HEAD~1", "HEAD", rolloutPaths)
	require.NoError(t, err)
	require.Empty(t, res.Devices, "no device's plan changes")
	require.True(t, res.Changes(), "a rollout change is a change: exit code 2")
	sorted := func(roles ...string) []string {
		out := make([]string, len(roles))
		for i, role := range roles {
			out[i] = names[role]
		}
		slices.Sort(out)
		return out
	}
	require.Equal(t, []diff.RolloutChange{
		{Name: "rollout/default", Change: "changed", Fields: []planner.Change{
			{Field: "selector", From: "site=a", To: "ring=canary,site=a"},
			{Field: "waves", From: "[ring=canary; 10% after 1h; 50% after 6h]", To: "[100% after 2h]"},
			{Field: "gate", From: "https://gate.example.com/ok?wave={wave}", To: "https://gate.example.com/ok?wave={wave} (other credentials)"},
			{Field: "stage", From: "onSight", To: "onRelease"},
		}, Devices: sorted("a-canary", "e-added"), Left: sorted("b-wave1", "c-wave2", "d-nowave")},
		{Name: "rollout/frozen", Change: "removed", Devices: sorted("p-paused")},
		{Name: "rollout/night", Change: "changed", Fields: []planner.Change{
			{Field: "paused", From: "false", To: "true"},
			{Field: "window", From: "0 2 * * * for 3h (Europe/Berlin)", To: "0 3 * * * for 3h (Europe/Berlin)"},
		}, Devices: sorted("n-night")},
		{Name: "rollout/solo", Change: "added", Devices: sorted("z-free")},
		{Name: "rollout/spare", Change: "added", Devices: []string{}},
	}, res.Rollouts)
	require.NotContains(t, fmt.Sprint(res.Rollouts), "other@", "a gate's credentials are not printed")

	res.Base, res.Head = diff.Revision{Name: "main"}, diff.Revision{Name: "change"}
	var txt, md, js bytes.Buffer
	require.NoError(t, diff.WriteText(&txt, res))
	require.NoError(t, diff.WriteMarkdown(&md, res, diff.MarkdownOptions{}))
	require.NoError(t, diff.WriteJSON(&js, res))
	require.Contains(t, txt.String(), "  rollout/night:\n    paused false → true\n    window 0 2 * * * for 3h (Europe/Berlin) → 0 3 * * * for 3h (Europe/Berlin)\n"+
		"    governs 1 device: "+names["n-night"]+"\n")
	require.Contains(t, txt.String(), "No plan changes: 8 devices, none changes; 5 rollouts changed.")
	golden.Assert(t, "rolloutchanges.txt.golden", byRole(txt.Bytes(), names))
	golden.Assert(t, "rolloutchanges.md.golden", byRole(md.Bytes(), names))
	golden.Assert(t, "rolloutchanges.json.golden", byRole(js.Bytes(), names))
}

// TestRunRolloutInDeviceBranch: with a branch per device, a rollout in a
// device's branch that pauses shows as that rollout's change.
func TestRunRolloutInDeviceBranch(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("README.md", "fleet\n")
	r.Commit("main")
	r.Git("checkout", "--quiet", "-b", "devices/cam-1")
	r.WriteFile("device.yaml", labelled("cam-1", "site: a", "  files: [{path: /etc/x, content: x}]\n"))
	r.WriteFile("rollout.yaml", rolloutDoc("mine", "  selector: {}\n"))
	r.Commit("cam-1")
	r.WriteFile("rollout.yaml", rolloutDoc("mine", "  selector: {}\n  paused: true\n"))
	r.Commit("pause cam-1")
	res, err := diff.Run(context.Background(), open(t, r), "devices/cam-1~1", "devices/cam-1", diff.Options{Ref: "devices/{device}"})
	require.NoError(t, err)
	require.Empty(t, res.Devices)
	require.Equal(t, []diff.RolloutChange{{Name: "rollout/mine", Change: "changed",
		Fields: []planner.Change{{Field: "paused", From: "false", To: "true"}}, Devices: []string{"cam-1"}}}, res.Rollouts)
}

// TestRunNoRollout: a diff in which no rollout governs a changed device
// has no rollout line or section, and its JSON no rollout field.
func TestRunNoRollout(t *testing.T) {
	r, base, head := profileFleet(t)
	res, err := diff.Run(context.Background(), open(t, r), base, head, profilePaths)
	require.NoError(t, err)
	require.NotEmpty(t, res.Devices)
	var txt, md, js bytes.Buffer
	require.NoError(t, diff.WriteText(&txt, res))
	require.NoError(t, diff.WriteMarkdown(&md, res, diff.MarkdownOptions{}))
	require.NoError(t, diff.WriteJSON(&js, res))
	for _, out := range []string{txt.String(), md.String(), js.String()} {
		require.NotContains(t, strings.ToLower(out), "rollout")
	}
}

// TestDeviceRolloutString covers the lines the fleet of TestRunRollouts
// does not: a rollout without waves, one with only selector waves, a
// wave with an after and a window, a window in UTC by default.
func TestDeviceRolloutString(t *testing.T) {
	canary := []manifest.Wave{{Selector: &manifest.Selector{MatchLabels: map[string]string{"ring": "canary"}}}}
	window := &manifest.Window{Schedule: "30 1 * * 6", Duration: manifest.Duration(90 * time.Minute)}
	gate := &manifest.Gate{URL: "https://gate.example.com/{device}"}
	spec := func(waves []manifest.Wave, w *manifest.Window, g *manifest.Gate) *manifest.Rollout {
		return &manifest.Rollout{Metadata: manifest.ProfileMetadata{Name: "r"}, Spec: manifest.RolloutSpec{Selector: &manifest.Selector{}, Waves: waves, Window: w, Gate: g}}
	}
	tests := []struct {
		name string
		r    diff.DeviceRollout
		want string
	}{
		{"no waves", diff.DeviceRollout{Rollout: spec(nil, nil, nil), Bucket: 40},
			"wave 0 of rollout/r (every device it governs), at once"},
		{"selector waves only, not matched", diff.DeviceRollout{Rollout: spec(canary, nil, nil), Wave: rollout.NoWave, Bucket: 3},
			"in no wave of rollout/r (no wave's selector matches it and there is no percent wave): held"},
		{"an after, then a window in UTC, then a gate",
			diff.DeviceRollout{Rollout: spec(append(canary, manifest.Wave{Percent: 100, After: manifest.Duration(90 * time.Minute)}), window, gate), Wave: 1, Bucket: 3, After: 90 * time.Minute},
			"wave 1 of rollout/r (100%, bucket 3), opens 1h30m after the device sees the release, then inside the window 30 1 * * 6 for 1h30m (UTC), if the gate answers 200"},
		{"an added device in no wave", diff.DeviceRollout{Rollout: spec([]manifest.Wave{{Percent: 20}}, nil, nil), Wave: rollout.NoWave, Bucket: 60, Added: true},
			"in no wave of rollout/r (bucket 60 is past the last percent, 20), but an added device has applied nothing: it takes its first commit at once"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.r.String())
		})
	}
}

// TestRunRolloutBrakes: a commit that adds brakes to a rollout and
// changes its devices shows the brakes where it shows the waves: on each
// later-wave device's line, in the rollout's change, in the markdown
// notes and the JSON, the hub without credentials.
func TestRunRolloutBrakes(t *testing.T) {
	r := testgit.NewRepo(t)
	waves := "  selector: {}\n  waves:\n    - selector: {matchLabels: {ring: canary}}\n    - {percent: 100, after: 1h}\n"
	r.WriteFile("fleet/default.yaml", rolloutDoc("default", waves))
	write := func(content string) {
		r.WriteFile("devices/cam-1/device.yaml", labelled("cam-1", "ring: canary", "  files: [{path: /etc/x, content: "+content+"}]\n"))
		r.WriteFile("devices/cam-2/device.yaml", labelled("cam-2", "site: a", "  files: [{path: /etc/x, content: "+content+"}]\n"))
	}
	write("v1")
	r.Commit("fleet")
	write("v2")
	r.WriteFile("fleet/default.yaml", rolloutDoc("default", waves+
		"  brakes: {hub: \"https://ops:s3cret@hub.example:8420\", maxFailed: 1, minApplied: 2, soak: 10m}\n"))
	r.Commit("v2 with brakes")
	res, err := diff.Run(context.Background(), open(t, r), "HEAD~1", "HEAD", rolloutPaths)
	require.NoError(t, err)
	const brakes = "hub https://hub.example:8420, maxFailed 1, minApplied 2 healthy for 10m, onHubDown hold"
	require.Equal(t, []diff.RolloutChange{{Name: "rollout/default", Change: "changed",
		Fields:  []planner.Change{{Field: "brakes", From: "none", To: brakes}},
		Devices: []string{"cam-1", "cam-2"}}}, res.Rollouts)

	var txt, md, js bytes.Buffer
	require.NoError(t, diff.WriteText(&txt, res))
	require.NoError(t, diff.WriteMarkdown(&md, res, diff.MarkdownOptions{}))
	require.NoError(t, diff.WriteJSON(&js, res))
	require.Contains(t, txt.String(), "Rollout: wave 0 of rollout/default (selector ring=canary), at once\n", "the first wave has no brakes")
	require.Contains(t, txt.String(), "opens 1h after the device sees the release, if the brakes let it through ("+brakes+")")
	require.Contains(t, txt.String(), "brakes none → "+brakes)
	require.Contains(t, md.String(), "- Brakes: a device of wave 1 or later first asks the hub how the change went in the earlier waves, "+
		"and holds while they fail it or have not run it long enough: `"+brakes+"`.")
	require.Contains(t, js.String(), `"brakes": {`)
	require.Contains(t, js.String(), `"hub": "https://hub.example:8420"`)
	for _, out := range []string{txt.String(), md.String(), js.String()} {
		require.NotContains(t, out, "s3cret", "the hub's credentials are not printed")
	}
}
