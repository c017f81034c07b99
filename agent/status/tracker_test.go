package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/drift"
	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/planner"
)

// tickT0 is when the first tick of a test sequence starts.
var tickT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeTick describes one tick by hand, as the agent would report it.
type fakeTick struct {
	at         time.Duration // start, after tickT0
	took       time.Duration // default 1s
	commit     string        // "" for no snapshot
	fetched    bool
	actions    []planner.Action
	unchanged  int
	applied    []string // ids of the actions that succeeded, in plan order
	failed     string   // id of the action that failed
	rolledBack []string
	failedStep string // the step that failed; "" and no plan when it is "open" or "fetch"
	downloaded int64
	info       map[string]string // Tick.Info
}

func (f fakeTick) result() *Tick {
	res := &Tick{Started: tickT0.Add(f.at), Duration: f.took, Downloaded: f.downloaded, RolledBack: f.rolledBack, Info: f.info}
	if res.Duration == 0 {
		res.Duration = time.Second
	}
	if f.commit != "" {
		res.Revision = "main@sha1:" + f.commit
		res.Fetch = FetchUnchanged
		if f.fetched {
			res.Fetch = FetchChanged
		}
		if f.failedStep != "fetch" {
			res.Target = res.Revision
		}
	}
	if f.failedStep == "fetch" {
		res.Fetch = FetchError
	}
	if f.failedStep == "open" || f.failedStep == "fetch" && f.commit == "" {
		return res
	}
	res.Plan = &planner.Changeset{Device: "cam-017", Revision: "main@sha1:" + f.commit, Actions: f.actions, Unchanged: f.unchanged}
	res.Drift = drift.Detect(res.Plan, res.Started)
	byID := map[string]planner.Action{}
	for _, a := range f.actions {
		byID[a.Resource] = a
	}
	for _, id := range f.applied {
		res.Applied = append(res.Applied, byID[id])
	}
	if f.failed != "" {
		a := byID[f.failed]
		res.Failed = &a
	}
	return res
}

// action is a plan action; its kind is the first part of its id.
func action(typ planner.ActionType, id, reason string) planner.Action {
	kind, _, _ := strings.Cut(id, "/")
	k, err := planner.ParseKind(kind)
	if err != nil {
		panic(err)
	}
	what, _ := strings.CutPrefix(reason, "drift: ")
	a := planner.Action{Type: typ, Resource: id, Kind: k, Reason: reason}
	if strings.HasPrefix(reason, "drift: ") {
		a.Drift = planner.Drift(what)
	}
	return a
}

// resourceLines prints resources as "id state: message", for short
// comparisons.
func resourceLines(rs []ResourceStatus) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s: %s", r.ID, r.State, r.Message))
	}
	return out
}

func driftLines(ds []DriftRecord) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s %s %s seen %s reverted %q", d.Kind, d.Resource, d.Reason, RFC3339(d.Time), d.Reverted))
	}
	return out
}

func changed(tr *Tracker) bool {
	select {
	case <-tr.Changed():
		return true
	default:
		return false
	}
}

func TestTrackerFollowsTicks(t *testing.T) {
	const (
		file    = "file/etc/infer/config.yaml"
		model   = "model/detector"
		service = "service/infer"
	)
	at := func(d time.Duration) string { return RFC3339(tickT0.Add(d)) }
	pullErr := errors.New("apply model/detector: pull registry.local:5000/detector: connection refused")
	fetchErr := errors.New("fetch fleet repo: https://git.example.com/fleet.git: connection refused")
	steps := []struct {
		name      string
		tick      fakeTick
		err       error
		suspended string

		result      string
		applied     string
		target      string
		lastError   string
		failures    int
		lastSuccess string
		resources   []string
		drift       []string
		changed     bool
	}{{
		name:      "suspended: creates stay pending",
		tick:      fakeTick{commit: "aaa", fetched: true, actions: []planner.Action{action(planner.Create, file, "declared"), action(planner.Create, model, "declared")}},
		suspended: "tend suspend: maintenance",
		result:    ResultSuspended, applied: "main@sha1:old", target: "main@sha1:aaa", lastSuccess: at(time.Second),
		resources: []string{file + " pending: declared", model + " pending: declared"},
		drift:     []string{},
		changed:   true,
	}, {
		name:   "applied: pending becomes ok",
		tick:   fakeTick{at: time.Minute, commit: "aaa", actions: []planner.Action{action(planner.Create, file, "declared"), action(planner.Create, model, "declared")}, applied: []string{file, model}},
		result: ResultSuccess, applied: "main@sha1:aaa", target: "main@sha1:aaa", lastSuccess: at(time.Minute + time.Second),
		resources: []string{file + " ok: declared", model + " ok: declared"},
		drift:     []string{},
		changed:   true,
	}, {
		name:      "drift seen while suspended stays drifted",
		tick:      fakeTick{at: 2 * time.Minute, commit: "aaa", unchanged: 1, actions: []planner.Action{action(planner.Update, file, "drift: content changed on node")}},
		suspended: "tend suspend: maintenance",
		result:    ResultSuspended, applied: "main@sha1:aaa", target: "main@sha1:aaa", lastSuccess: at(2*time.Minute + time.Second),
		resources: []string{file + " drifted: drift: content changed on node", model + " ok: declared"},
		drift:     []string{"file " + file + " content changed on node seen " + at(2*time.Minute) + ` reverted ""`},
		changed:   true,
	}, {
		name:      "the same drift again is the same event: nothing changed",
		tick:      fakeTick{at: 3 * time.Minute, commit: "aaa", unchanged: 1, actions: []planner.Action{action(planner.Update, file, "drift: content changed on node")}},
		suspended: "tend suspend: maintenance",
		result:    ResultSuspended, applied: "main@sha1:aaa", target: "main@sha1:aaa", lastSuccess: at(3*time.Minute + time.Second),
		resources: []string{file + " drifted: drift: content changed on node", model + " ok: declared"},
		drift:     []string{"file " + file + " content changed on node seen " + at(2*time.Minute) + ` reverted ""`},
		changed:   false,
	}, {
		name:   "resumed: drift reverted at the end of the tick",
		tick:   fakeTick{at: 4 * time.Minute, took: 2 * time.Second, commit: "aaa", unchanged: 1, actions: []planner.Action{action(planner.Update, file, "drift: content changed on node")}, applied: []string{file}},
		result: ResultSuccess, applied: "main@sha1:aaa", target: "main@sha1:aaa", lastSuccess: at(4*time.Minute + 2*time.Second),
		resources: []string{file + " ok: drift: content changed on node (reverted)", model + " ok: declared"},
		drift:     []string{"file " + file + " content changed on node seen " + at(2*time.Minute) + " reverted \"" + at(4*time.Minute+2*time.Second) + `"`},
		changed:   true,
	}, {
		name: "a failed action: failed with the error, the rest pending, applied revision kept",
		tick: fakeTick{at: 5 * time.Minute, commit: "bbb", fetched: true, unchanged: 1, failedStep: "apply", failed: model,
			actions: []planner.Action{action(planner.Update, model, "update: sha256:ab → sha256:cd"), action(planner.Restart, service, "restart: model/detector changed")}},
		err:    pullErr,
		result: ResultError, applied: "main@sha1:aaa", target: "main@sha1:bbb", lastError: pullErr.Error(), failures: 1, lastSuccess: at(4*time.Minute + 2*time.Second),
		resources: []string{file + " ok: drift: content changed on node (reverted)", model + " failed: " + pullErr.Error(), service + " pending: restart: model/detector changed"},
		drift:     []string{"file " + file + " content changed on node seen " + at(2*time.Minute) + " reverted \"" + at(4*time.Minute+2*time.Second) + `"`},
		changed:   true,
	}, {
		name:   "fetch fails: resources and target as they were",
		tick:   fakeTick{at: 6 * time.Minute, failedStep: "fetch"},
		err:    fetchErr,
		result: ResultError, applied: "main@sha1:aaa", target: "main@sha1:bbb", lastError: fetchErr.Error(), failures: 2, lastSuccess: at(4*time.Minute + 2*time.Second),
		resources: []string{file + " ok: drift: content changed on node (reverted)", model + " failed: " + pullErr.Error(), service + " pending: restart: model/detector changed"},
		drift:     []string{"file " + file + " content changed on node seen " + at(2*time.Minute) + " reverted \"" + at(4*time.Minute+2*time.Second) + `"`},
		changed:   true,
	}, {
		name: "success clears the error and moves the applied revision",
		tick: fakeTick{at: 7 * time.Minute, commit: "bbb", unchanged: 1, applied: []string{model, service},
			actions: []planner.Action{action(planner.Update, model, "update: sha256:ab → sha256:cd, 1.0 kB to download"), action(planner.Restart, service, "restart: model/detector changed")},
			info:    map[string]string{model: "registry.local:5000/detector:v8 → sha256:cd"}},
		result: ResultSuccess, applied: "main@sha1:bbb", target: "main@sha1:bbb", lastSuccess: at(7*time.Minute + time.Second),
		resources: []string{file + " ok: drift: content changed on node (reverted)", model + " ok: registry.local:5000/detector:v8 → sha256:cd", service + " ok: restart: model/detector changed"},
		drift:     []string{"file " + file + " content changed on node seen " + at(2*time.Minute) + " reverted \"" + at(4*time.Minute+2*time.Second) + `"`},
		changed:   true,
	}, {
		name:   "a no-op after a success changes the result",
		tick:   fakeTick{at: 8 * time.Minute, commit: "bbb", unchanged: 3},
		result: ResultNoop, applied: "main@sha1:bbb", target: "main@sha1:bbb", lastSuccess: at(8*time.Minute + time.Second),
		resources: []string{file + " ok: drift: content changed on node (reverted)", model + " ok: registry.local:5000/detector:v8 → sha256:cd", service + " ok: restart: model/detector changed"},
		drift:     []string{"file " + file + " content changed on node seen " + at(2*time.Minute) + " reverted \"" + at(4*time.Minute+2*time.Second) + `"`},
		changed:   true,
	}, {
		name:   "another no-op changes nothing but the times",
		tick:   fakeTick{at: 9 * time.Minute, commit: "bbb", unchanged: 3},
		result: ResultNoop, applied: "main@sha1:bbb", target: "main@sha1:bbb", lastSuccess: at(9*time.Minute + time.Second),
		resources: []string{file + " ok: drift: content changed on node (reverted)", model + " ok: registry.local:5000/detector:v8 → sha256:cd", service + " ok: restart: model/detector changed"},
		drift:     []string{"file " + file + " content changed on node seen " + at(2*time.Minute) + " reverted \"" + at(4*time.Minute+2*time.Second) + `"`},
		changed:   false,
	}, {
		name:   "a deleted resource leaves the status",
		tick:   fakeTick{at: 10 * time.Minute, commit: "ccc", fetched: true, unchanged: 2, applied: []string{file}, actions: []planner.Action{action(planner.Delete, file, "no longer declared")}},
		result: ResultSuccess, applied: "main@sha1:ccc", target: "main@sha1:ccc", lastSuccess: at(10*time.Minute + time.Second),
		resources: []string{model + " ok: registry.local:5000/detector:v8 → sha256:cd", service + " ok: restart: model/detector changed"},
		drift:     []string{"file " + file + " content changed on node seen " + at(2*time.Minute) + " reverted \"" + at(4*time.Minute+2*time.Second) + `"`},
		changed:   true,
	}}

	tr := NewTracker("cam-017", "v1.2.3")
	require.False(t, changed(tr), "nothing observed yet")
	tr.SetApplied("main@sha1:old", "commit:old")
	require.True(t, changed(tr), "seeding the applied revision changes the status")
	var docs bytes.Buffer
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			res := st.tick.result()
			tr.Observe(res, st.err, st.suspended)
			s := tr.Status()
			require.Equal(t, FormatVersion, s.FormatVersion)
			require.Equal(t, "cam-017", s.Device)
			require.Equal(t, "v1.2.3", s.Version)
			require.Equal(t, st.result, s.Result)
			require.Equal(t, st.applied, s.AppliedRevision)
			require.Equal(t, st.target, s.TargetRevision)
			require.Equal(t, RFC3339(res.Started.Add(res.Duration)), s.LastReconcile)
			require.Equal(t, st.lastSuccess, s.LastSuccess)
			require.Equal(t, st.lastError, s.LastError)
			require.Equal(t, st.failures, s.ConsecutiveFailures)
			require.Equal(t, st.suspended != "", s.Suspended)
			require.Equal(t, st.suspended, s.SuspendReason)
			require.Equal(t, st.resources, resourceLines(s.Resources))
			require.Equal(t, st.drift, driftLines(s.Drift))
			require.Equal(t, st.changed, changed(tr), "Changed()")
			fmt.Fprintf(&docs, "# %s\n", st.name)
			enc := json.NewEncoder(&docs)
			enc.SetIndent("", "  ")
			require.NoError(t, enc.Encode(s))
		})
	}
	golden.Assert(t, "tracker.golden", docs.Bytes())
}

func TestTrackerRollback(t *testing.T) {
	tr := NewTracker("cam-017", "")
	err := errors.New("service/infer did not become healthy: rolled back file/etc/infer/a, service/infer")
	tr.Observe(fakeTick{commit: "bbb", failedStep: "apply", failed: "service/infer", applied: []string{"file/etc/infer/a"},
		rolledBack: []string{"file/etc/infer/a", "service/infer"},
		actions:    []planner.Action{action(planner.Update, "file/etc/infer/a", "drift: mode changed on node"), action(planner.Update, "service/infer", "update: spec changed in Git")}}.result(), err, "")
	s := tr.Status()
	require.Equal(t, []string{
		"file/etc/infer/a pending: rolled back: service/infer failed (drift: mode changed on node)",
		"service/infer failed: " + err.Error(),
	}, resourceLines(s.Resources))
	require.Len(t, s.Drift, 1)
	require.Empty(t, s.Drift[0].Reverted, "a rolled-back revert did not revert the drift")
	require.Empty(t, s.AppliedRevision)
}

func TestTrackerDriftGoneByItself(t *testing.T) {
	tr := NewTracker("cam-017", "")
	drifted := fakeTick{commit: "aaa", actions: []planner.Action{action(planner.Delete, "file/etc/infer/extra", "drift: created on node")}}
	tr.Observe(drifted.result(), nil, "tend suspend")
	tr.Observe(fakeTick{at: time.Minute, commit: "aaa", unchanged: 1}.result(), nil, "tend suspend")
	s := tr.Status()
	require.Equal(t, []string{"file/etc/infer/extra ok: "}, resourceLines(s.Resources))
	require.Equal(t, RFC3339(tickT0.Add(time.Minute+time.Second)), s.Drift[0].Reverted, "no longer seen")

	// Seen again later: a new event.
	drifted.at = 2 * time.Minute
	tr.Observe(drifted.result(), nil, "tend suspend")
	require.Len(t, tr.Status().Drift, 2)
}

func TestTrackerKeepsRecentDrift(t *testing.T) {
	tr := NewTracker("cam-017", "")
	for i := range DriftHistory + 10 {
		tr.Observe(fakeTick{at: time.Duration(i) * time.Minute, commit: "aaa",
			actions: []planner.Action{action(planner.Update, "file/etc/infer/a", fmt.Sprintf("drift: edit %d", i))}}.result(), nil, "tend suspend")
	}
	s := tr.Status()
	require.Len(t, s.Drift, DriftHistory)
	require.Equal(t, "edit 10", s.Drift[0].Reason)
	require.Equal(t, fmt.Sprintf("edit %d", DriftHistory+9), s.Drift[DriftHistory-1].Reason)
}

func TestTrackerStatusIsACopy(t *testing.T) {
	tr := NewTracker("cam-017", "")
	tr.Observe(fakeTick{commit: "aaa", actions: []planner.Action{action(planner.Update, "file/etc/infer/a", "drift: content changed on node")}}.result(), nil, "tend suspend")
	s := tr.Status()
	s.Resources[0].State = "mangled"
	s.Drift[0].Reverted = "mangled"
	s2 := tr.Status()
	require.Equal(t, StateDrifted, s2.Resources[0].State)
	require.Empty(t, s2.Drift[0].Reverted)
	require.Equal(t, []ResourceStatus{}, NewTracker("x", "").Status().Resources, "[] in JSON, not null")
}

// The loop observes while the status server and the reporter read: under
// -race this finds unguarded state, and every drift event a tick reported
// as new is in the status exactly once.
func TestTrackerConcurrentUse(t *testing.T) {
	tr := NewTracker("cam-017", "")
	var wg sync.WaitGroup
	var fresh atomic.Int64
	for i := range 4 {
		wg.Go(func() {
			for j := range 10 {
				events := tr.Observe(fakeTick{at: time.Duration(j) * time.Second, commit: "aaa",
					actions: []planner.Action{action(planner.Update, fmt.Sprintf("file/etc/infer/%d", i), "drift: content changed on node")}}.result(), nil, map[bool]string{true: "tend suspend"}[j%2 == 0])
				fresh.Add(int64(len(events)))
				_ = tr.Status().Fingerprint()
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			select {
			case <-tr.Changed():
			default:
			}
			_ = tr.Status()
		}
	})
	wg.Wait()
	s := tr.Status()
	require.GreaterOrEqual(t, fresh.Load(), int64(4), "each resource's first drift is new")
	require.Equal(t, int(fresh.Load()), len(s.Drift), "every new event is recorded once")
	seen := map[string]bool{}
	for _, d := range s.Drift {
		seen[d.Resource] = true
	}
	require.Len(t, seen, 4)
	require.Equal(t, ResultNoop, s.Result)
}

func TestStatusText(t *testing.T) {
	s := Status{
		FormatVersion: FormatVersion, Device: "cam-017", Version: "v1.2.3",
		AppliedRevision: "main@sha1:aaa", TargetRevision: "main@sha1:bbb",
		LastReconcile: "2026-03-01T12:05:00Z", LastSuccess: "2026-03-01T12:01:00Z",
		Result: ResultError, ConsecutiveFailures: 3,
		LastError: "invalid manifests for device cam-017 at main@sha1:bbb:\ndevices/cam-017/infer.yaml:12: spec.files[0].mode: \"999\" is not an octal mode",
		Resources: []ResourceStatus{
			{ID: "file/etc/infer/config.yaml", State: StateDrifted, Message: "drift: content changed on node"},
			{ID: "file/etc/infer/labels.txt", State: StateOK},
			{ID: "model/detector", State: StateFailed, Message: "apply model/detector: pull registry.local:5000/detector: connection refused"},
			{ID: "service/infer", State: StatePending, Message: "restart: model/detector changed"},
			{ID: "service/web", State: StateOK, Message: "declared"},
		},
		Drift: []DriftRecord{
			{Time: tickT0, Resource: "file/etc/infer/labels.txt", Kind: "file", Reason: "mode changed on node", Reverted: "2026-03-01T12:00:01.25Z"},
			{Time: tickT0.Add(4 * time.Minute), Resource: "file/etc/infer/config.yaml", Kind: "file", Reason: "content changed on node"},
		},
		Services: []ServiceStatus{
			{ID: "service/infer", Replicas: []ReplicaStatus{
				{Replica: 0, PID: 4242, State: ReplicaRunning, Restarts: 1, Health: "healthy", LastExit: "killed by signal killed"},
				{Replica: 1, State: ReplicaRestarting, Restarts: 7, LastExit: "exit code 3", CrashLoop: true},
			}},
			{ID: "service/web", Replicas: []ReplicaStatus{
				{Replica: 0, PID: 4250, State: ReplicaRunning, Health: "unhealthy: service unhealthy: 3 checks failed in a row, last: GET http://127.0.0.1:8080/healthz: 503"},
				{Replica: 1, State: ReplicaNotStarted},
			}},
		},
	}
	now := tickT0.Add(5*time.Minute + 42*time.Second)
	var out bytes.Buffer
	require.NoError(t, WriteText(&out, s, now))
	fresh := NewTracker("cam-017", "").Status()
	out.WriteString("---\n")
	require.NoError(t, WriteText(&out, fresh, now))
	suspended := Status{Device: "cam-017", AppliedRevision: "main@sha1:aaa", LastReconcile: "2026-03-01T12:05:00Z", LastSuccess: "2026-03-01T12:05:00Z",
		Result: ResultSuspended, Pending: 2, Suspended: true, SuspendReason: "tend suspend at 2026-03-01T11:00:00Z: maintenance"}
	out.WriteString("---\n")
	require.NoError(t, WriteText(&out, suspended, now))
	held := Status{Device: "cam-017", AppliedRevision: "main@sha1:aaa", TargetRevision: "main@sha1:bbb", LastReconcile: "2026-03-01T12:05:00Z", LastSuccess: "2026-03-01T12:05:00Z",
		Result: ResultHeld, Held: "held: rollout wave 2 opens 2026-03-01T14:00Z"}
	out.WriteString("---\n")
	require.NoError(t, WriteText(&out, held, now))
	golden.Assert(t, "status.golden", out.Bytes())
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                          "0s",
		0:                                     "0s",
		42*time.Second + 400*time.Millisecond: "42s",
		time.Minute:                           "1m",
		4*time.Minute + 42*time.Second:        "4m42s",
		time.Hour + 20*time.Second:            "1h",
		3*time.Hour + 5*time.Minute:           "3h5m",
		52 * time.Hour:                        "2d4h",
	} {
		require.Equal(t, want, shortDuration(d), d.String())
	}
}

// Every declared resource is listed, a service in a crash loop as failed,
// and a resource no longer declared drops out.
func TestTrackerListsDeclaredAndNotes(t *testing.T) {
	tr := NewTracker("cam-017", "")
	res := fakeTick{commit: "aaa"}.result()
	res.Declared = []string{"file/etc/infer/a", "model/detector", "service/infer"}
	res.Notes = map[string]string{"service/infer": "replica 0 crash-looping (exit code 3)"}
	res.Info = map[string]string{"model/detector": "registry.local:5000/models/detector:v8 → sha256:ab"}
	tr.Observe(res, nil, "")
	require.Equal(t, []string{
		"file/etc/infer/a ok: ",
		"model/detector ok: registry.local:5000/models/detector:v8 → sha256:ab",
		"service/infer failed: replica 0 crash-looping (exit code 3)",
	}, resourceLines(tr.Status().Resources))

	res = fakeTick{commit: "bbb"}.result()
	res.Declared = []string{"service/infer"}
	tr.Observe(res, nil, "")
	require.Equal(t, []string{"service/infer ok: "}, resourceLines(tr.Status().Resources))
}

// The status reports the release of the target and the key of the one
// the node runs; a tick whose target stages says so in its result, and a
// tick that did not decide keeps what the last one said.
func TestTrackerReportsReleases(t *testing.T) {
	tr := NewTracker("cam-1", "v1")
	tr.SetApplied("main@sha1:aaa", "commit:aaa")
	require.Equal(t, "commit:aaa", tr.Status().AppliedRelease)

	next := &Release{Key: "model/m@sha256:" + strings.Repeat("b", 64), Revision: "main@sha1:aaa",
		Resources: []ReleaseResource{{ID: "model/m", Ref: "r/m", Tag: "1.2.0", Digest: "sha256:" + strings.Repeat("b", 64)}}}
	tr.Observe(&Tick{Revision: "main@sha1:aaa", Target: "main@sha1:aaa", TargetRelease: next, AppliedRelease: "commit:aaa", Staging: true}, nil, "")
	st := tr.Status()
	require.Equal(t, ResultStaging, st.Result, "a release downloading is no noop")
	require.Equal(t, next, st.Release)
	require.Equal(t, "commit:aaa", st.AppliedRelease)

	tr.Observe(&Tick{Revision: "main@sha1:aaa", Target: "main@sha1:aaa", TargetRelease: next, AppliedRelease: next.Key}, nil, "")
	st = tr.Status()
	require.Equal(t, ResultNoop, st.Result)
	require.Equal(t, next.Key, st.AppliedRelease, "taken")

	tr.Observe(&Tick{}, errors.New("fetch: unreachable"), "")
	st = tr.Status()
	require.Equal(t, next, st.Release, "a tick that did not decide keeps the release")
	require.Equal(t, next.Key, st.AppliedRelease)
}
