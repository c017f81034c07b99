package e2e

// Rollout brakes end to end: real tend agents report to a real tend-hub
// (SQLite) and a later-wave device asks it, before taking a release, how
// the canary fared.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/hub"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// brakesSoak is how long the canary must run a release healthy before
// the later wave takes it.
const brakesSoak = 3 * time.Second

// A healthy canary lets the later wave through once it ran the release
// for soak (the later device holds with reason brakes until then); a
// canary whose service fails its health check after activation rolls
// back, the hub counts it failed, and the later device holds with reason
// brakes, reverting drift, while the webhook tells of the trip.
func TestBrakesStopTheLaterWave(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var hooked []hub.WebhookEvent
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e hub.WebhookEvent
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &e) == nil {
			mu.Lock()
			hooked = append(hooked, e)
			mu.Unlock()
		}
	}))
	defer hook.Close()
	h := startHubArgs(t, hubBin, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"), "", []string{"--webhook", hook.URL})

	repo := testgit.NewRepo(t)
	profile := func(v, health string) string {
		return "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: all}\nspec:\n  selector: {}\n" +
			"  files:\n    - {path: /etc/infer/model.txt, content: \"" + v + "\"}\n" +
			"  services:\n    - name: infer\n      command: [\"/bin/sh\", \"-c\", \"exec sleep 600\", \"" + v + "\"]\n      stopTimeout: 2s\n" +
			"      health: {exec: [\"/bin/sh\", \"-c\", \"" + health + "\"], interval: 100ms, startupGrace: 1s}\n"
	}
	repo.WriteFile("profiles/all.yaml", profile("v1", "true"))
	repo.WriteFile("profiles/rollout.yaml", fmt.Sprintf(`apiVersion: tend.dev/v1alpha1
kind: Rollout
metadata: {name: default}
spec:
  selector: {}
  waves:
    - selector: {matchLabels: {ring: canary}}
    - {percent: 100}
  brakes: {hub: %q, maxFailed: 0, minApplied: 1, soak: %s}
`, h.url, brakesSoak))
	v1 := "HEAD@sha1:" + repo.Commit("v1")
	url := repo.URL(testgit.StartHTTP(t, filepath.Dir(repo.Dir())).URL)
	agent := func(device, ring string) *rolloutAgent {
		report := fmt.Sprintf("allowPaths: [/etc/infer]\nreport: {url: %s/v1/reports, interval: 2s, tokenFile: %s}\n", h.url, h.deviceToken(device))
		n := labeledNode(t, url, device, "ring: "+ring, report)
		t.Cleanup(func() { stopServices(t, n.state) })
		return &rolloutAgent{name: device, n: n, a: startAgent(t, n)}
	}
	canary, later := agent("cam-001", "canary"), agent("cam-002", "main")
	for _, d := range []*rolloutAgent{canary, later} {
		eventually(t, func() bool { return d.a.status()["appliedRevision"] == v1 })
	}

	// v2, healthy: the canary takes it at once, cam-002 once the canary
	// ran it healthy for soak.
	repo.WriteFile("profiles/all.yaml", profile("v2", "true"))
	v2 := "HEAD@sha1:" + repo.Commit("v2")
	eventually(t, func() bool { return canary.a.status()["appliedRevision"] == v2 })
	eventually(t, func() bool { return later.a.status()["appliedRevision"] == v2 })
	require.Equal(t, "v2", later.n.read("etc/infer/model.txt"))
	require.Contains(t, later.a.logs(), "held: brakes: ", "cam-002 waited for the canary's soak")
	var rd hub.ReleaseDetail
	eventually(t, func() bool { // the hub hears of it within a report
		require.NoError(t, json.Unmarshal([]byte(h.get("/v1/releases/"+v2)), &rd))
		return rd.Counts[hub.StateApplied] == 2
	})
	at := map[string]time.Time{}
	for _, p := range rd.DeviceParts {
		require.Equal(t, hub.StateApplied, p.State, p.Device)
		require.NotNil(t, p.Wave, "%s reported its wave", p.Device)
		at[p.Device], _ = time.Parse(time.RFC3339, p.Applied)
	}
	require.GreaterOrEqual(t, at["cam-002"].Sub(at["cam-001"]), brakesSoak-time.Second, "cam-002 took v2 after the canary's soak (RFC 3339 seconds)")

	// v3 fails its health check on the canary: rolled back there, failed
	// at the hub; cam-002 holds it, and reverts drift to v2.
	repo.WriteFile("profiles/all.yaml", profile("v3", "false"))
	v3 := "HEAD@sha1:" + repo.Commit("v3")
	eventually(t, func() bool {
		var dd hub.DeviceDetail
		return json.Unmarshal([]byte(h.get("/v1/devices/cam-001")), &dd) == nil && dd.Device.State == hub.StateFailed
	})
	want := "held: brakes: 1 of 1 wave-0 devices failed " + v3[:len("HEAD@sha1:")+12] + "… (maxFailed 0)"
	eventually(t, func() bool { return later.a.status()["held"] == want })
	eventually(t, func() bool {
		metrics, _ := later.a.get("/metrics")
		return strings.Contains(metrics, `tend_release_held{reason="brakes"} 1`+"\n")
	})
	require.Equal(t, v2, later.a.status()["appliedRevision"])
	require.NoError(t, os.WriteFile(filepath.Join(later.n.root, "etc/infer/model.txt"), []byte("edited by hand"), 0o644))
	eventually(t, func() bool { return later.n.read("etc/infer/model.txt") == "v2" })
	require.Equal(t, want, later.a.status()["held"], "drift reverted, the release still held")

	out, _, code := tend(t, "fleet", "release", v3, "--hub", h.url, "--read-token-file", h.tokenFile)
	require.Equal(t, 1, code, out)
	eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range hooked {
			if e.Kind == hub.WebhookBrakes && e.Revision == v3 {
				return true
			}
		}
		return false
	})
}
