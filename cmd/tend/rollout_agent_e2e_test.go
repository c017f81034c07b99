package main

// Three real agents, each deciding by itself, roll a release out in waves
// over a repo served by the real git http-backend: the canary takes it at
// its next tick, the others hold it for the wave's after, counted from
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

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// waveAfter is the after of the rollout's percent wave in
// TestAgentsRollOutInWaves.
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
	// contentChecked and metricChecked say the file content and the held
	// metric were seen while it reported held, before its wave opened.
	contentChecked, metricChecked bool
	applied                       bool
}

// startRolloutAgent runs a `tend agent` for device with its own root,
// stateDir and agent config (device:, labels:), polling url every second.
func startRolloutAgent(t *testing.T, url, device, labels string) *rolloutAgent {
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
allowPaths: [/etc/infer]
`, device, labels, url, n.state, n.root)), 0o644))
	n.flags = []string{"--config", config, "--log-format", "text", "--log-level", "debug"}
	return &rolloutAgent{name: device, n: n, a: startAgent(t, n)}
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

// A canary takes a release at its next tick; the two other devices report
// it held, naming their wave and when it opens, keep serving the applied
// content meanwhile, show tend_release_held{reason="wave"} 1, and take it
// no earlier than waveAfter after they first saw it.
func TestAgentsRollOutInWaves(t *testing.T) {
	repo := testgit.NewRepo(t)
	profile := func(v string) string {
		return "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: all}\nspec:\n  selector: {}\n" +
			"  files:\n    - {path: /etc/infer/model.txt, content: \"" + v + " for ${device}\"}\n"
	}
	repo.WriteFile("profiles/all.yaml", profile("v1"))
	repo.WriteFile("profiles/rollout.yaml", fmt.Sprintf(`apiVersion: tend.dev/v1alpha1
kind: Rollout
metadata: {name: default}
spec:
  selector: {}
  waves:
    - selector: {matchLabels: {ring: canary}}
    - {percent: 100, after: %s}
`, waveAfter))
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
	// The agents are processes that push nothing: their /status is
	// sampled, every 20 ms, until each applied the release (30 s fails
	// the test only).
	deadline := time.Now().Add(30 * time.Second)
	sample := time.NewTicker(20 * time.Millisecond)
	defer sample.Stop()
	for done := false; !done; <-sample.C {
		require.False(t, time.Now().After(deadline), "the release did not roll out within 30s")
		done = true
		for _, d := range fleet {
			if d.applied {
				continue
			}
			done = false
			s := d.a.status()
			if s["appliedRevision"] == "HEAD@sha1:"+v2 {
				d.applied = true
				continue
			}
			held, _ := s["held"].(string)
			if held == "" {
				continue
			}
			// What it serves, at the moment it reports held: read before
			// the wave opens, it must be the applied content.
			before := time.Now()
			content := d.n.read("etc/infer/model.txt")
			require.False(t, d.canary, "the canary held the release: %s", held)
			require.Equal(t, "held", s["result"])
			require.Equal(t, "HEAD@sha1:"+v2, s["targetRevision"])
			require.Equal(t, "HEAD@sha1:"+v1, s["appliedRevision"])
			m := heldWave.FindStringSubmatch(held)
			require.NotNil(t, m, "%s: held reason %q", d.name, held)
			if d.held == "" {
				d.held = held
				var err error
				layout := "2006-01-02T15:04Z"
				if len(m[1]) > len(layout) {
					layout = "2006-01-02T15:04:05Z"
				}
				d.opens, err = time.Parse(layout, m[1])
				require.NoError(t, err)
				var seen map[string]time.Time
				ok, err := atomicfile.ReadJSON(filepath.Join(d.n.state, "releases.json"), &seen)
				require.NoError(t, err)
				require.True(t, ok, "%s holds a release and has no releases.json", d.name)
				require.Len(t, seen, 1)
				for _, at := range seen {
					d.firstSeen = at
				}
				opens := d.firstSeen.Add(waveAfter)
				require.False(t, d.opens.Before(opens), "%s: the reason names %s, before the wave opens at %s", d.name, d.opens, opens)
				require.Less(t, d.opens.Sub(opens), time.Second,
					"%s: the wave opens %s after it first saw the release, %s", d.name, waveAfter, d.firstSeen)
			}
			require.Equal(t, d.held, held, "%s: the opens time moved between ticks", d.name)
			if before.Before(d.firstSeen.Add(waveAfter)) {
				require.Equal(t, "v1 for "+d.name, content, "%s serves the release while it reports it held", d.name)
				d.contentChecked = true
			}
			if !d.metricChecked {
				// The metrics follow the status by a moment.
				metrics, _ := d.a.get("/metrics")
				d.metricChecked = strings.Contains(metrics, `tend_release_held{reason="wave"} 1`+"\n") &&
					time.Now().Before(d.firstSeen.Add(waveAfter))
			}
		}
	}

	canary := fleet[0].appliedAt(t, "/etc/infer/model.txt")
	for _, d := range fleet {
		require.Equal(t, "v2 for "+d.name, d.n.read("etc/infer/model.txt"))
		s := d.a.status()
		require.Empty(t, s["held"], d.name)
		if d.canary {
			continue
		}
		require.NotEmpty(t, d.held, "%s took the release without ever reporting it held", d.name)
		at := d.appliedAt(t, "/etc/infer/model.txt")
		require.True(t, canary.Before(at), "%s took the release at %s, before the canary at %s", d.name, at, canary)
		require.False(t, at.Before(d.firstSeen.Add(waveAfter).Truncate(time.Millisecond)),
			"%s took the release at %s, before its wave opened (first seen %s + %s)", d.name, at, d.firstSeen, waveAfter)
		eventually(t, func() bool {
			metrics, _ := d.a.get("/metrics")
			return strings.Contains(metrics, `tend_release_held{reason="wave"} 0`+"\n")
		})
		require.Contains(t, d.a.logs(), `msg="release held; the node keeps its applied revision and reverts drift to it" device=`+d.name)
	}
	// Each check made while held needs the test to look within the
	// wave's after of the held report; one device is enough to prove it.
	require.True(t, fleet[1].contentChecked || fleet[2].contentChecked, "no look at the content before a wave opened")
	require.True(t, fleet[1].metricChecked || fleet[2].metricChecked, "tend_release_held{reason=\"wave\"} 1 not seen while held")
	for _, d := range fleet {
		d.a.stop()
	}
}
