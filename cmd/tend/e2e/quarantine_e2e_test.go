package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/planner"
)

// A model version rolled back at the applied commit is quarantined by its
// digest: the next apply keeps the good version and warns why, and tend
// retry model/m@… makes it tried again.
func TestRetryQuarantinedModel(t *testing.T) {
	reg := testoci.Start(t)
	reg.PushFiles(t, "models/m:1.1.0", map[string][]byte{"model.onnx": []byte("good")})
	repo := testgit.NewRepo(t)
	n := newNode(t, repo.Dir(), "--insecure-registry", reg.Host)
	t.Cleanup(func() { stopServices(t, n.state) })
	current := filepath.Join(n.state, "models", "m", "current", "model.onnx")
	repo.WriteFile("devices/cam-017/device.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"+
		"  models:\n    - {name: m, ref: "+reg.Ref("models/m")+", policy: {semver: \">=1.0.0\"}}\n"+
		"  services:\n    - name: infer\n      command: [\"/bin/sh\", \"-c\", \"exec sleep 600\", \"${model:m}/model.onnx\"]\n      stopTimeout: 2s\n"+
		fmt.Sprintf("      health: {exec: [\"/bin/sh\", \"-c\", \"! grep -q bad %s\"], interval: 100ms, startupGrace: 1s}\n", current))
	repo.Commit("follow m by semver")
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	bad := reg.PushFiles(t, "models/m:1.2.0", map[string][]byte{"model.onnx": []byte("bad")})
	_, errOut, code = n.tend("apply")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "service/infer did not become healthy")

	short := planner.ShortDigest(bad)
	_, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `Warning: model/m 1\.2\.0 \(`+short+`\) was rolled back on this node at \S+Z: service/infer did not become healthy: .*; `+
		`push a new version, or run tend retry model/m@`+short+`\n`, errOut)

	_, errOut, code = n.tend("retry", "model/m@sha256:0000")
	require.Equal(t, 1, code)
	require.Equal(t, "Error: release model/m@sha256:0000 is not quarantined on this node (model/m@"+bad+" are quarantined)\n", errOut)
	out, errOut, code := n.tend("retry", "model/m@"+short)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^Retrying model/m@`+regexp.QuoteMeta(bad)+` \(rolled back at \S+Z: service/infer did not become healthy.*\)\.\n`+
		`The next tick or tend apply tries it again\.\n$`, out)
	_, errOut, code = n.tend("apply")
	require.Equal(t, 1, code, "1.2.0 is tried again")
	require.Contains(t, errOut, "service/infer did not become healthy")
	_, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "Warning: model/m 1.2.0 ("+short+") was rolled back", "quarantined again")
}

// quarantineAgent is one device of TestBadModelVersionIsNotRetried: a
// real `tend agent` with its own root and stateDir.
type quarantineAgent struct {
	name string
	n    *node
	a    *runningAgent
}

// newQuarantineAgent prepares a device following the fleet repo at
// repoDir with labels, polling every second; start runs it. Its model's
// stable path is known before the agent starts, so the fleet repo can
// name it in the health probe.
func newQuarantineAgent(t *testing.T, repoDir, registry, device, labels string) *quarantineAgent {
	t.Helper()
	n := labeledNode(t, repoDir, device, labels, fmt.Sprintf("registries: {insecure: [%s]}\n", registry))
	t.Cleanup(func() { stopServices(t, n.state) }) // after the agent is killed
	return &quarantineAgent{name: device, n: n}
}

func (d *quarantineAgent) start(t *testing.T) { d.a = startAgent(t, d.n) }

// model is what the device's active version of model m holds.
func (d *quarantineAgent) model() string {
	d.n.t.Helper()
	b, err := os.ReadFile(d.modelFile())
	require.NoError(d.n.t, err)
	return string(b)
}

func (d *quarantineAgent) modelFile() string {
	return filepath.Join(d.n.state, "models", "m", "current", "model.onnx")
}

// manifest declares model m followed by semver and a service whose
// health probe fails while the model holds "bad".
func (d *quarantineAgent) manifest(ref string) string {
	return "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: " + d.name + "}\nspec:\n" +
		"  models:\n    - {name: m, ref: " + ref + ", policy: {semver: \">=1.0.0\"}}\n" +
		"  services:\n    - name: infer\n      command: [\"/bin/sh\", \"-c\", \"exec sleep 600\", \"${model:m}/model.onnx\"]\n      stopTimeout: 2s\n" +
		"      health: {exec: [\"/bin/sh\", \"-c\", \"! grep -q bad " + d.modelFile() + "\"], interval: 100ms, startupGrace: 1s}\n"
}

// tick asks for a tick now (POST /reconcile: a full reconcile, whatever
// the backoff after failures) and waits until a reconcile has ended
// since (tend_reconcile_total moved).
func (d *quarantineAgent) tick(t *testing.T) {
	t.Helper()
	before, ok := scrape(d.a.addr)
	require.True(t, ok)
	resp, err := http.Post("http://"+d.a.addr+"/reconcile", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	eventually(t, func() bool { s, ok := scrape(d.a.addr); return ok && s.ticks > before.ticks })
}

// pid is the pid of the one replica of service/infer.
func (d *quarantineAgent) pid(t *testing.T) int {
	t.Helper()
	for _, svc := range d.a.status()["services"].([]any) {
		svc := svc.(map[string]any)
		if svc["id"] == "service/infer" {
			replicas := svc["replicas"].([]any)
			require.Len(t, replicas, 1)
			pid, _ := replicas[0].(map[string]any)["pid"].(float64)
			return int(pid)
		}
	}
	t.Fatalf("%s: no service/infer in its status", d.name)
	return 0
}

// lines are the lines of the agent's log that hold every one of parts.
func (d *quarantineAgent) lines(parts ...string) []string {
	var out []string
	for _, line := range strings.Split(d.a.logs(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// count is how many lines of the agent's log hold every one of parts.
func (d *quarantineAgent) count(parts ...string) int { return len(d.lines(parts...)) }

// metric reports whether /metrics holds the sample line.
func (d *quarantineAgent) metric(line string) bool {
	m, _ := d.a.get("/metrics")
	return strings.Contains(m, line+"\n")
}

// loggedAt is the time of the first log line holding every one of parts.
func (d *quarantineAgent) loggedAt(t *testing.T, parts ...string) time.Time {
	t.Helper()
	lines := d.lines(parts...)
	require.NotEmpty(t, lines, "%s: no log line holds %q:\n%s", d.name, parts, d.a.logs())
	ts, _, _ := strings.Cut(strings.TrimPrefix(lines[0], "time="), " ")
	at, err := time.Parse(time.RFC3339Nano, ts)
	require.NoError(t, err, lines[0])
	return at
}

const (
	rollingBack    = `msg="rolling back"`
	tickFailed     = `msg="reconcile failed; the node keeps its last applied state"`
	modelActivated = `msg="model activated"`
	releaseHeld    = `msg="release held; the node keeps its applied revision and reverts drift to it"`
	heldQuarantine = `tend_release_held{reason="quarantined"}`
)

// The seed's scenario through two real agents and a real registry: a
// canary and a device of a later wave follow model m by semver, with a
// service healthy only on a good model. A good 1.1.0 rolls out by waves. A
// bad 1.2.0 is taken by the canary once, rolled back and quarantined: at
// every full reconcile after (each of which took 1.2.0 again before
// quarantine held digests) the model never reads bad and the service is
// not restarted, while /status and /metrics say why. tend retry
// model/m@… tries it exactly once more. The later wave, without
// brakes, takes 1.2.0 once when its wave opens and quarantines it by
// itself. A good 1.2.1 is then taken by both.
func TestBadModelVersionIsNotRetried(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	canary := newQuarantineAgent(t, repo.Dir(), reg.Host, "cam-001", "ring: canary")
	later := newQuarantineAgent(t, repo.Dir(), reg.Host, "cam-002", "ring: main")
	fleet := []*quarantineAgent{canary, later}
	reg.PushFiles(t, "models/m:1.0.0", map[string][]byte{"model.onnx": []byte("good 1.0.0")})
	repo.WriteFile("profiles/rollout.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n"+
		"  waves:\n    - selector: {matchLabels: {ring: canary}}\n    - {percent: 100, after: 2s}\n")
	for _, d := range fleet {
		repo.WriteFile("devices/"+d.name+"/device.yaml", d.manifest(reg.Ref("models/m")))
	}
	repo.Commit("follow m by semver, by waves")
	for _, d := range fleet {
		d.start(t)
	}
	for _, d := range fleet {
		eventually(t, func() bool { return d.a.status()["appliedRevision"] != "" })
		require.Equal(t, "good 1.0.0", d.model(), "%s takes its first release at once", d.name)
	}

	// A good 1.1.0 rolls out by waves: the later device holds it first.
	good := reg.PushFiles(t, "models/m:1.1.0", map[string][]byte{"model.onnx": []byte("good 1.1.0")})
	for _, d := range fleet {
		eventually(t, func() bool { return d.model() == "good 1.1.0" })
	}
	require.Zero(t, canary.count(releaseHeld), "the canary held a release")
	require.Positive(t, later.count(releaseHeld, "resources=model/m"), later.a.logs())
	require.True(t, canary.loggedAt(t, modelActivated, " digest="+good).Before(later.loggedAt(t, modelActivated, " digest="+good)),
		"the later wave took 1.1.0 before the canary")
	laterHeld := later.count(releaseHeld, "resources=model/m")

	// A bad 1.2.0: the canary takes it, fails health and rolls back.
	bad := reg.PushFiles(t, "models/m:1.2.0", map[string][]byte{"model.onnx": []byte("bad 1.2.0")})
	short := planner.ShortDigest(bad)
	eventually(t, func() bool { return canary.count(tickFailed) == 1 })
	require.Equal(t, 1, canary.count(rollingBack))
	require.Equal(t, 1, canary.count(modelActivated, " digest="+bad), "the canary took 1.2.0")
	require.Equal(t, "good 1.1.0", canary.model(), "rolled back")
	pid := canary.pid(t)
	require.NotZero(t, pid)

	// Watch the model file while the canary reconciles, in full, again
	// and again (a manual tick is never held off by the failure backoff).
	stop := make(chan struct{})
	seen := make(chan string, 1)
	go func() {
		defer close(seen)
		read := time.NewTicker(5 * time.Millisecond)
		defer read.Stop()
		for {
			select {
			case <-stop:
				return
			case <-read.C:
			}
			if b, err := os.ReadFile(canary.modelFile()); err == nil && strings.Contains(string(b), "bad") {
				seen <- string(b)
				return
			}
		}
	}()
	warning := regexp.MustCompile(`^model/m 1\.2\.0 \(` + regexp.QuoteMeta(short) + `\) was rolled back on this node at \S+Z: ` +
		`service/infer did not become healthy: .*; push a new version, or run tend retry model/m@` + regexp.QuoteMeta(short) + `$`)
	quarantined := func(d *quarantineAgent) {
		t.Helper()
		s := d.a.status()
		require.Empty(t, s["lastError"], d.name)
		require.Regexp(t, warning, s["warning"], d.name)
		q, _ := s["quarantined"].([]any)
		require.Len(t, q, 1, "%s: %v", d.name, s["quarantined"])
		entry := q[0].(map[string]any)
		require.Equal(t, "model/m@"+bad, entry["release"])
		require.Equal(t, s["appliedRevision"], entry["revision"])
		require.Equal(t, "1.2.0", entry["tag"])
		require.Regexp(t, `^service/infer did not become healthy: replica 0: unhealthy: not healthy after \S+ \(startupGrace 1s\): \d+ checks failed, `+
			`last: exec \[/bin/sh -c ! grep -q bad `+regexp.QuoteMeta(d.modelFile())+`\]: exit status 1$`, entry["reason"])
		_, err := time.Parse(time.RFC3339, entry["at"].(string))
		require.NoError(t, err)
		require.Equal(t, "good 1.1.0", d.model(), d.name)
		eventually(t, func() bool { return d.metric(heldQuarantine + " 1") })
	}
	for range 4 {
		canary.tick(t)
		quarantined(canary)
		require.Equal(t, pid, canary.pid(t), "the service was restarted")
	}
	close(stop)
	if b, ok := <-seen; ok {
		t.Fatalf("the canary's model read %q after the rollback", b)
	}
	require.Equal(t, 1, canary.count(rollingBack), "1.2.0 was tried again")
	require.Equal(t, 1, canary.count(modelActivated, " digest="+bad), "1.2.0 was activated again")

	// tend retry makes the canary try 1.2.0 once more, and only once.
	out, errOut, code := canary.n.tend("retry", "model/m@"+short, "--listen", canary.a.addr)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^Retrying model/m@`+regexp.QuoteMeta(bad)+` \(rolled back at \S+Z: service/infer did not become healthy.*\)\.\n`+
		`The agent reconciles now\.\n$`, out)
	eventually(t, func() bool { return canary.count(tickFailed) == 2 })
	require.Equal(t, 2, canary.count(rollingBack))
	require.Equal(t, 2, canary.count(modelActivated, " digest="+bad))
	pid = canary.pid(t)
	for range 2 {
		canary.tick(t)
		quarantined(canary)
		require.Equal(t, pid, canary.pid(t), "the service was restarted")
	}
	require.Equal(t, 2, canary.count(rollingBack), "1.2.0 was tried more than once after tend retry")

	// The later wave, no brakes stopping it, holds 1.2.0 until its wave
	// opens, takes it once, and quarantines it by itself.
	eventually(t, func() bool { return later.count(tickFailed) == 1 })
	require.Equal(t, 1, later.count(rollingBack))
	require.Greater(t, later.count(releaseHeld, "resources=model/m"), laterHeld, "the later wave took 1.2.0 without holding it")
	pid = later.pid(t)
	for range 2 {
		later.tick(t)
		quarantined(later)
		require.Equal(t, pid, later.pid(t), "the service was restarted")
	}
	require.Equal(t, 1, later.count(rollingBack), "the later wave tried 1.2.0 again")
	require.Equal(t, 1, later.count(modelActivated, " digest="+bad))

	// A good 1.2.1 is a new release: the canary takes it, then the later wave.
	reg.PushFiles(t, "models/m:1.2.1", map[string][]byte{"model.onnx": []byte("good 1.2.1")})
	for _, d := range fleet {
		d.tick(t)
		eventually(t, func() bool { return d.model() == "good 1.2.1" })
		eventually(t, func() bool { return d.metric(heldQuarantine + " 0") })
		s := d.a.status()
		require.Empty(t, s["warning"], d.name)
		require.Len(t, s["quarantined"], 1, "%s: 1.2.0 stays rolled back here, for fleet views", d.name)
	}
	require.Equal(t, 2, canary.count(rollingBack))
	require.Equal(t, 1, later.count(rollingBack))
	for _, d := range fleet {
		d.a.stop()
	}
}
