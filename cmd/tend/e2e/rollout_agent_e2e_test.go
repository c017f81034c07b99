package e2e

// Three real agents, each deciding by itself, roll a release out in waves
// over a repo served by the real git http-backend: the canary takes it at
// its next tick, the others hold it until the wave's after, counted from
// when each first saw it, and then take it.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// waveAfter is how long TestAgentsRollOutInWaves lets its held devices
// wait, at least, once it brings their wave closer.
const waveAfter = 3 * time.Second

// rolloutAgent is one device of TestAgentsRollOutInWaves and what the
// test saw of it.
type rolloutAgent struct {
	name   string
	canary bool
	n      *node
	a      *runningAgent

	held      string    // the first held reason it reported
	opens     time.Time // the held reason's opens time
	firstSeen time.Time // from releases.json in its stateDir, when it reported held
}

// startRolloutAgent runs a `tend agent` for device with its own root,
// stateDir and agent config (device:, labels:), polling url every second.
func startRolloutAgent(t *testing.T, url, device, labels string) *rolloutAgent {
	t.Helper()
	n := labeledNode(t, url, device, labels, "allowPaths: [/etc/infer]\n")
	n.flags = append(n.flags, "--log-level", "debug")
	return &rolloutAgent{name: device, n: n, a: startAgent(t, n)}
}

// labeledNode is a device with its own root, stateDir and agent config
// (device:, labels:, more config lines), following the fleet repo at url
// with profiles and polling it every second.
func labeledNode(t *testing.T, url, device, labels, more string) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{t: t, root: filepath.Join(dir, "root"), state: filepath.Join(dir, "state")}
	require.NoError(t, os.MkdirAll(n.root, 0o755))
	config := filepath.Join(dir, "agent.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: tend.dev/v1alpha1
kind: AgentConfig
device: %s
labels: {%s}
source: {url: %q, paths: [profiles, "devices/{device}"]}
schedule: "@every 1s"
stateDir: %s
root: %s
`, device, labels, url, n.state, n.root)+more), 0o644))
	n.flags = []string{"--config", config, "--log-format", "text"}
	return n
}

// appliedAt is when the agent's log says it last wrote path: the log
// line follows the write, and its time is cut to the millisecond.
func (d *rolloutAgent) appliedAt(t *testing.T, path string) time.Time {
	t.Helper()
	re := regexp.MustCompile(`(?m)^time=(\S+) level=DEBUG msg=applied resource=file` + regexp.QuoteMeta(path) + `\b`)
	m := re.FindAllStringSubmatch(d.a.logs(), -1)
	require.NotEmpty(t, m, "%s applied %s: no log line says so:\n%s", d.name, path, d.a.logs())
	at, err := time.Parse(time.RFC3339Nano, m[len(m)-1][1])
	require.NoError(t, err)
	return at
}

var heldWave = regexp.MustCompile(`^held: rollout wave 1 opens (\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d)?Z)$`)

// heldOpens is when the held reason of a wave says it opens.
func heldOpens(t *testing.T, device, held string) time.Time {
	t.Helper()
	m := heldWave.FindStringSubmatch(held)
	require.NotNil(t, m, "%s: held reason %q", device, held)
	layout := "2006-01-02T15:04Z"
	if len(m[1]) > len(layout) {
		layout = "2006-01-02T15:04:05Z"
	}
	at, err := time.Parse(layout, m[1])
	require.NoError(t, err)
	return at
}

// A canary takes a release at its next tick; the two other devices report
// it held, naming their wave and when it opens, keep serving the applied
// content meanwhile, and show tend_release_held{reason="wave"} 1. The wave
// is first an hour away, so what a held device reports is looked at for
// as long as the test needs; then a commit that changes only the Rollout
// brings the wave to a few seconds after each device first saw the
// release (the clock is not restarted: the release is the same), and the
// devices take it when their wave opens, no earlier.
func TestAgentsRollOutInWaves(t *testing.T) {
	repo := testgit.NewRepo(t)
	profile := func(v string) string {
		return "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: all}\nspec:\n  selector: {}\n" +
			"  files:\n    - {path: /etc/infer/model.txt, content: \"" + v + " for ${device}\"}\n"
	}
	rollout := func(after time.Duration) string {
		return fmt.Sprintf(`apiVersion: tend.dev/v1alpha1
kind: Rollout
metadata: {name: default}
spec:
  selector: {}
  waves:
    - selector: {matchLabels: {ring: canary}}
    - {percent: 100, after: %s}
`, after)
	}
	repo.WriteFile("profiles/all.yaml", profile("v1"))
	repo.WriteFile("profiles/rollout.yaml", rollout(time.Hour))
	v1 := repo.Commit("v1")
	url := repo.URL(testgit.StartHTTP(t, filepath.Dir(repo.Dir())).URL)

	fleet := []*rolloutAgent{
		startRolloutAgent(t, url, "cam-001", "ring: canary"),
		startRolloutAgent(t, url, "cam-002", "ring: main"),
		startRolloutAgent(t, url, "cam-003", "ring: main"),
	}
	fleet[0].canary = true
	for _, d := range fleet {
		eventually(t, func() bool { return d.a.status()["appliedRevision"] == "HEAD@sha1:"+v1 })
		require.Equal(t, "v1 for "+d.name, d.n.read("etc/infer/model.txt"), "the first commit is taken at once")
	}

	repo.WriteFile("profiles/all.yaml", profile("v2"))
	v2 := repo.Commit("v2")
	eventually(t, func() bool { return fleet[0].a.status()["appliedRevision"] == "HEAD@sha1:"+v2 })
	require.Equal(t, "v2 for cam-001", fleet[0].n.read("etc/infer/model.txt"), "the canary takes the release at once")
	for _, d := range fleet[1:] {
		var s map[string]any
		eventually(t, func() bool {
			s = d.a.status()
			held, _ := s["held"].(string)
			return held != ""
		})
		d.held = s["held"].(string)
		require.Equal(t, "held", s["result"], d.name)
		require.Equal(t, "HEAD@sha1:"+v2, s["targetRevision"], d.name)
		require.Equal(t, "HEAD@sha1:"+v1, s["appliedRevision"], d.name)
		require.Equal(t, "v1 for "+d.name, d.n.read("etc/infer/model.txt"), "%s serves the applied release while it reports the new one held", d.name)
		var seen map[string]time.Time
		ok, err := statedir.ReadJSON(filepath.Join(d.n.state, "releases.json"), &seen)
		require.NoError(t, err)
		require.True(t, ok, "%s holds a release and has no releases.json", d.name)
		require.Len(t, seen, 1)
		for _, at := range seen {
			d.firstSeen = at
		}
		d.opens = heldOpens(t, d.name, d.held)
		opens := d.firstSeen.Add(time.Hour)
		require.False(t, d.opens.Before(opens), "%s: the reason names %s, before the wave opens at %s", d.name, d.opens, opens)
		require.Less(t, d.opens.Sub(opens), time.Second,
			"%s: the wave opens an hour after it first saw the release, %s", d.name, d.firstSeen)
		eventually(t, func() bool { // the metrics follow the status by a moment
			metrics, _ := d.a.get("/metrics")
			return strings.Contains(metrics, `tend_release_held{reason="wave"} 1`+"\n")
		})
	}

	// The wave now opens waveAfter from now, counted from each device's
	// first sight; a device that sees the commit before then holds on.
	first := fleet[1].firstSeen
	if fleet[2].firstSeen.Before(first) {
		first = fleet[2].firstSeen
	}
	after := (time.Since(first) + waveAfter).Truncate(time.Second) + time.Second
	repo.WriteFile("profiles/rollout.yaml", rollout(after))
	v3 := repo.Commit("the wave opens sooner")
	for _, d := range fleet {
		eventually(t, func() bool {
			s := d.a.status()
			if held, _ := s["held"].(string); held != "" && !d.canary && s["targetRevision"] == "HEAD@sha1:"+v3 {
				// Seen before the wave opened: counted from the first
				// sight of the release, not from the commit.
				opens := heldOpens(t, d.name, held)
				require.False(t, opens.Before(d.firstSeen.Add(after)), "%s: %s", d.name, held)
				require.Less(t, opens.Sub(d.firstSeen.Add(after)), time.Second, "%s: %s", d.name, held)
			}
			return s["appliedRevision"] == "HEAD@sha1:"+v3
		})
	}

	canary := fleet[0].appliedAt(t, "/etc/infer/model.txt")
	for _, d := range fleet {
		require.Equal(t, "v2 for "+d.name, d.n.read("etc/infer/model.txt"))
		s := d.a.status()
		require.Empty(t, s["held"], d.name)
		if d.canary {
			continue
		}
		at := d.appliedAt(t, "/etc/infer/model.txt")
		require.True(t, canary.Before(at), "%s took the release at %s, before the canary at %s", d.name, at, canary)
		require.False(t, at.Before(d.firstSeen.Add(after).Truncate(time.Millisecond)),
			"%s took the release at %s, before its wave opened (first seen %s + %s)", d.name, at, d.firstSeen, after)
		eventually(t, func() bool {
			metrics, _ := d.a.get("/metrics")
			return strings.Contains(metrics, `tend_release_held{reason="wave"} 0`+"\n")
		})
		require.Contains(t, d.a.logs(), `msg="release held; the node keeps its applied revision and reverts drift to it" device=`+d.name)
	}
	for _, d := range fleet {
		d.a.stop()
	}
}
