package main

// The seed's scenario by tag push, end to end: real tend agents follow a
// model by semver under a Rollout with brakes, report to a real tend hub
// (SQLite, and PostgreSQL), and a retrained model pushed as a tag, with
// no commit, meets the brakes as a commit does.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/hub"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/internal/testkit/testpg"
)

// tagSoak is how long the canary runs a release healthy before the later
// wave takes it.
const tagSoak = 3 * time.Second

// newReportingQuarantineAgent is a device of newQuarantineAgent that
// reports to h every second.
func newReportingQuarantineAgent(t *testing.T, h *runningHub, repoDir, registry, device, labels string) *quarantineAgent {
	t.Helper()
	more := fmt.Sprintf("registries: {insecure: [%s]}\nreport: {url: %s/v1/reports, interval: 1s, tokenFile: %s}\n", registry, h.url, h.deviceToken(device))
	n := labeledNode(t, repoDir, device, labels, more)
	t.Cleanup(func() { stopServices(t, n.state) })
	return &quarantineAgent{name: device, n: n}
}

// release reads the hub's record of one release (a key, a commit, or
// model/NAME@DIGEST|TAG); empty while the hub has none.
func (h *runningHub) release(t *testing.T, name string) hub.ReleaseDetail {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.url+"/v1/releases/"+url.PathEscape(name), nil)
	require.NoError(t, err)
	req.SetBasicAuth("me", "read-secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var rd hub.ReleaseDetail
	if resp.StatusCode == http.StatusNotFound {
		return rd
	}
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rd))
	return rd
}

// part is device's part in rd, or nil.
func part(rd hub.ReleaseDetail, device string) *hub.ReleaseDevice {
	for i := range rd.DeviceParts {
		if rd.DeviceParts[i].Device == device {
			return &rd.DeviceParts[i]
		}
	}
	return nil
}

// watchFile reads path every 5 ms until stop is called, and returns
// whether it ever held bad.
func watchFile(path, bad string) (stop func() bool) {
	var seen atomic.Bool
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), bad) {
				seen.Store(true)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() bool { close(done); wg.Wait(); return seen.Load() }
}

func TestBrakesStopATagPushedModel(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			dbURL := "sqlite://" + filepath.Join(t.TempDir(), "hub.db")
			if db == "postgres" {
				dbURL = testpg.Start(t)
			}
			tagPushedRelease(t, startHub(t, dbURL, ""))
		})
	}
}

// tagPushedRelease runs the seed's scenario against the hub h: a canary
// and a device of a later wave follow model m by semver; a good 1.1.0
// goes canary first and the later wave after soak; a bad 1.2.0 is rolled
// back on the canary and never activated on the later device (a reader
// polling its model every 5 ms never sees it), and tend fleet release
// says so; a commit that changes nothing on the devices does not restart
// a soak; a fixed 1.2.1 goes through.
func tagPushedRelease(t *testing.T, h *runningHub) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	canary := newReportingQuarantineAgent(t, h, repo.Dir(), reg.Host, "cam-001", "ring: canary")
	later := newReportingQuarantineAgent(t, h, repo.Dir(), reg.Host, "cam-002", "ring: main")
	fleet := []*quarantineAgent{canary, later}
	reg.PushFiles(t, "models/m:1.0.0", map[string][]byte{"model.onnx": []byte("good 1.0.0")})
	repo.WriteFile("profiles/rollout.yaml", fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n"+
		"  waves:\n    - selector: {matchLabels: {ring: canary}}\n    - {percent: 100}\n"+
		"  brakes: {hub: %q, maxFailed: 0, minApplied: 1, soak: %s}\n", h.url, tagSoak))
	for _, d := range fleet {
		repo.WriteFile("devices/"+d.name+"/device.yaml", d.manifest(reg.Ref("models/m")))
	}
	first := repo.Commit("follow m by semver, by waves, with brakes")
	for _, d := range fleet {
		d.start(t)
	}
	for _, d := range fleet {
		eventually(t, func() bool { return d.a.status()["appliedRevision"] != "" })
		require.Equal(t, "good 1.0.0", d.model(), "%s takes its first release at once", d.name)
		require.Equal(t, "commit:"+first, d.a.status()["appliedRelease"])
	}

	// A good 1.1.0, pushed as a tag: the canary takes it, the later wave
	// once the canary ran it healthy for soak.
	good := reg.PushFiles(t, "models/m:1.1.0", map[string][]byte{"model.onnx": []byte("good 1.1.0")})
	goodKey := "model/m@" + good
	for _, d := range fleet {
		eventually(t, func() bool { return d.model() == "good 1.1.0" })
		eventually(t, func() bool { return d.a.status()["appliedRelease"] == goodKey })
	}
	require.Positive(t, later.count(`held: brakes: `), "the later wave waited for the canary's soak:\n%s", later.a.logs())
	var rd hub.ReleaseDetail
	eventually(t, func() bool { rd = h.release(t, goodKey); return rd.Counts[hub.StateApplied] == 2 })
	canaryAt, _ := time.Parse(time.RFC3339, part(rd, canary.name).Applied)
	laterAt, _ := time.Parse(time.RFC3339, part(rd, later.name).Applied)
	require.GreaterOrEqual(t, laterAt.Sub(canaryAt), tagSoak-time.Second, "the later wave took 1.1.0 after the canary's soak (RFC 3339 seconds)")
	out, errOut, code := tend(t, "fleet", "release", "model/m@1.1.0", "--hub", h.url, "--read-token-file", h.tokenFile)
	require.Equal(t, 0, code, out+errOut)

	// A bad 1.2.0: the canary takes it, fails health and rolls back; the
	// later device holds it by its brakes, and its model never reads bad.
	stop := watchFile(later.modelFile(), "bad")
	pushed := time.Now()
	bad := reg.PushFiles(t, "models/m:1.2.0", map[string][]byte{"model.onnx": []byte("bad 1.2.0")})
	badKey := "model/m@" + bad
	eventually(t, func() bool { return canary.count(rollingBack) == 1 })
	tripped := regexp.MustCompile(`^held: brakes: 1 of 1 wave-0 devices failed model/m@sha256:[0-9a-f]+… \(maxFailed 0\)$`)
	eventually(t, func() bool {
		st := later.a.status()
		rel, _ := st["release"].(map[string]any)
		held, _ := st["held"].(string)
		return rel != nil && rel["key"] == badKey && tripped.MatchString(held)
	})
	// The margin the brakes keep (for the record, not asserted): the
	// later wave would open soak after the canary ran 1.2.0 healthy,
	// which it never did.
	t.Logf("1.2.0 pushed; the canary rolled back %s later, the later device held it as tripped within %s (soak %s)",
		canary.loggedAt(t, rollingBack).Sub(pushed).Round(time.Millisecond), time.Since(pushed).Round(time.Millisecond), tagSoak)
	eventually(t, func() bool { return later.metric(`tend_release_held{reason="brakes"} 1`) })
	require.Equal(t, goodKey, later.a.status()["appliedRelease"])
	out, errOut, code = tend(t, "fleet", "release", "model/m@1.2.0", "--hub", h.url, "--read-token-file", h.tokenFile)
	require.Equal(t, 1, code, out+errOut)
	require.Contains(t, out+errOut, canary.name)
	require.Contains(t, out+errOut, "rolled back")

	// A fixed 1.2.1 is a new release: it counts afresh and goes through.
	fixed := reg.PushFiles(t, "models/m:1.2.1", map[string][]byte{"model.onnx": []byte("good 1.2.1")})
	fixedKey := "model/m@" + fixed
	eventually(t, func() bool {
		rd = h.release(t, fixedKey)
		p := part(rd, canary.name)
		return p != nil && p.Applied != ""
	})
	canaryAt, _ = time.Parse(time.RFC3339, part(rd, canary.name).Applied)

	// A commit that changes nothing on the devices, during the soak: the
	// canary runs it with the same release, whose soak goes on.
	repo.WriteFile("profiles/none.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: none}\n"+
		"spec:\n  selector: {matchLabels: {ring: none}}\n  files:\n    - {path: /etc/infer/none, content: none}\n")
	unrelated := repo.Commit("a profile for no device")
	eventually(t, func() bool { return canary.a.status()["appliedRevision"] == "HEAD@sha1:"+unrelated })
	require.Equal(t, fixedKey, canary.a.status()["appliedRelease"], "the commit changed nothing on the canary")
	for _, d := range fleet {
		eventually(t, func() bool { return d.a.status()["appliedRelease"] == fixedKey && d.model() == "good 1.2.1" })
	}
	eventually(t, func() bool {
		rd = h.release(t, fixedKey)
		p := part(rd, later.name)
		return p != nil && p.Applied != ""
	})
	laterAt, _ = time.Parse(time.RFC3339, part(rd, later.name).Applied)
	require.GreaterOrEqual(t, laterAt.Sub(canaryAt), tagSoak-time.Second, "the later wave took 1.2.1 after the canary's soak (RFC 3339 seconds)")
	require.False(t, stop(), "the later device's model never read the bad 1.2.0")
	require.Zero(t, later.count(modelActivated, " digest="+bad), "the later device never activated 1.2.0")
	// The hub hears of the later device's apply at its next report.
	eventually(t, func() bool { return h.release(t, fixedKey).Counts[hub.StateApplied] == 2 })
	out, errOut, code = tend(t, "fleet", "release", "model/m@1.2.1", "--hub", h.url, "--read-token-file", h.tokenFile)
	require.Equal(t, 0, code, out+errOut)
}
