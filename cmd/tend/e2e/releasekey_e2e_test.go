package e2e

// The seed's scenario by tag push, end to end: real tend agents follow a
// model by semver under a Rollout with brakes, report to a real tend-hub
// (SQLite, reading the fleet repo with --fleet-source, and PostgreSQL,
// trusting the first wave reported), and a retrained model pushed as a
// tag, with no commit, meets the brakes as a commit does, whatever a
// hostile third device posts.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
			repo := testgit.NewRepo(t)
			if db == "postgres" {
				tagPushedRelease(t, startHub(t, testpg.Start(t), ""), repo)
				return
			}
			// The hub reads the fleet repo: the waves are its own.
			dir := t.TempDir()
			config := filepath.Join(dir, "fleet.yaml")
			require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\n"+
				"source: {url: %q, paths: [profiles, \"devices/{device}\"]}\nstateDir: %s\n", repo.Dir(), dir)), 0o644))
			h := startHubArgs(t, hubBin, "sqlite://"+filepath.Join(dir, "hub.db"), "", []string{"--fleet-source", config, "--fleet-interval", "200ms"})
			tagPushedRelease(t, h, repo)
			require.Positive(t, h.Metric(`tend_hub_reports_total{result="inconsistent"}`), "the hostile device's waves were ignored and counted")
		})
	}
}

// hostile posts made-up reports for a device of a later wave with its
// own token: what a stolen device could send.
type hostile struct {
	h     *runningHub
	name  string
	token string
	seq   int
}

func newHostile(t *testing.T, h *runningHub, name string) *hostile {
	b, err := os.ReadFile(h.deviceToken(name))
	require.NoError(t, err)
	return &hostile{h: h, name: name, token: strings.TrimSpace(string(b))}
}

// post reports that the device is in wave, runs applied and works
// towards target (model m at tag, digest), and rolled back quarantined.
func (x *hostile) post(t *testing.T, wave int, applied, target, tag, digest string, quarantined ...string) {
	t.Helper()
	x.seq++
	st := map[string]any{
		"formatVersion": "1", "device": x.name, "appliedRevision": "HEAD@sha1:" + strings.Repeat("0", 40),
		"lastReconcile": time.Now().Add(time.Duration(x.seq) * time.Second).UTC().Format(time.RFC3339Nano),
		"lastError":     "", "suspended": false, "resources": []any{}, "services": []any{}, "drift": []any{},
		"wave": wave, "rollout": "default", "appliedRelease": applied,
		"release": map[string]any{"key": target, "revision": "HEAD@sha1:" + strings.Repeat("0", 40),
			"resources": []any{map[string]any{"id": "model/m", "ref": "m", "tag": tag, "digest": digest}}},
		"reportSeq": map[string]any{"epoch": "hostile", "seq": x.seq},
	}
	var qs []any
	for _, q := range quarantined {
		qs = append(qs, map[string]any{"release": q, "revision": "HEAD@sha1:" + strings.Repeat("0", 40), "reason": "made up", "at": time.Now().UTC().Format(time.RFC3339)})
	}
	if qs != nil {
		st["quarantined"] = qs
	}
	b, err := json.Marshal(st)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, x.h.url+"/v1/reports", bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+x.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
}

// tagPushedRelease runs the seed's scenario against the hub h: a canary
// and a device of a later wave follow model m by semver; a good 1.1.0
// goes canary first and the later wave after soak; a bad 1.2.0 is rolled
// back on the canary and never activated on the later device (a reader
// polling its model every 5 ms never sees it), and tend fleet release
// says so; a commit that changes nothing on the devices does not restart
// a soak; a fixed 1.2.1 goes through. A hostile device of the later wave
// says it is in wave 0 and rolled 1.1.0 back, then that it runs 1.2.0
// healthy in wave 0: neither stops 1.1.0 nor lets 1.2.0 through.
func tagPushedRelease(t *testing.T, h *runningHub, repo *testgit.Repo) {
	reg := testoci.Start(t)
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
	// The wave labels in Git too, where a hub with --fleet-source reads them.
	repo.WriteFile("devices/cam-001/labels.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-001, labels: {ring: canary}}\n")
	repo.WriteFile("devices/cam-002/labels.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-002, labels: {ring: main}}\n")
	liar := newHostile(t, h, "cam-666")
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
	liar.post(t, 1, "commit:"+first, goodKey, "1.1.0", good)
	liar.post(t, 0, "commit:"+first, goodKey, "1.1.0", good, goodKey)
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
	require.Equal(t, 1, code, "the hostile device's own part is a failure: %s", out+errOut)
	require.Contains(t, out, "cam-666 (wave 1) rolled back", "in the wave it first took part in")

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
	liar.post(t, 0, badKey, badKey, "1.2.0", bad)
	later.tick(t)
	held, _ := later.a.status()["held"].(string)
	require.Regexp(t, `^held: brakes: 1 of [12] wave-0 devices failed model/m@sha256:[0-9a-f]+… \(maxFailed 0\)$`, held,
		"a wave-0 success the hub cannot check does not release the brakes (counted in wave 0 when the hub believes the first wave reported)")
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
	liar.post(t, 1, fixedKey, fixedKey, "1.2.1", fixed) // it follows model m too
	out, errOut, code = tend(t, "fleet", "release", "model/m@1.2.1", "--hub", h.url, "--read-token-file", h.tokenFile)
	require.Equal(t, 0, code, out+errOut)
}
