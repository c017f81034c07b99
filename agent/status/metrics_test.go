package status

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/promtext"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// scrape reads the metrics over HTTP (see promtext.Scrape).
func scrape(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	return promtext.Scrape(t, m.Handler())
}

// TestMetricsContract is the contract of DESIGN.md: every metric name, and
// every labelled series it lists, exists at zero from the agent's start.
func TestMetricsContract(t *testing.T) {
	got := scrape(t, NewMetrics())
	for _, series := range []string{
		`tend_reconcile_total{result="success"}`,
		`tend_reconcile_total{result="error"}`,
		`tend_reconcile_total{result="noop"}`,
		`tend_reconcile_duration_seconds_count`,
		`tend_reconcile_duration_seconds_sum`,
		`tend_drift_total{kind="file"}`,
		`tend_drift_total{kind="model"}`,
		`tend_drift_total{kind="service"}`,
		`tend_last_success_timestamp_seconds`,
		`tend_source_fetch_total{result="changed"}`,
		`tend_source_fetch_total{result="unchanged"}`,
		`tend_source_fetch_total{result="error"}`,
		`tend_model_bytes_downloaded_total`,
		`tend_registry_unreachable`,
		`tend_convergence_seconds_count`,
		`tend_convergence_seconds_sum`,
		`tend_suspended`,
		`tend_release_held{reason="wave"}`,
		`tend_release_held{reason="window"}`,
		`tend_release_held{reason="paused"}`,
		`tend_release_held{reason="brakes"}`,
		`tend_release_held{reason="gate"}`,
		`tend_release_held{reason="lock"}`,
		`tend_release_held{reason="quarantined"}`,
		`tend_notify_total{result="tick"}`,
		`tend_notify_total{result="skipped"}`,
		`tend_notify_total{result="error"}`,
		`tend_stage_bytes_total`,
		`tend_staging`,
		`tend_release_convergence_seconds_count`,
		`tend_release_convergence_seconds_sum`,
		`tend_release_lag_seconds`,
		`tend_policy_skipped_total{reason="quarantined"}`,
		`tend_policy_skipped_total{reason="unverified"}`,
	} {
		v, ok := got[series]
		require.True(t, ok, "%s missing", series)
		require.Zero(t, v, series)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		require.Contains(t, got, name, "Go and process collectors")
	}
	for series := range got {
		require.NotContains(t, series, "tend_applied_revision_info", "no revision is known before one is applied or seeded")
	}
	m := newMeter()
	m.SetApplied("main@sha1:aaa")
	require.Equal(t, 1.0, scrape(t, m.Metrics)[`tend_applied_revision_info{revision="main@sha1:aaa"}`])
}

func TestMetricsCountTicks(t *testing.T) {
	m := newMeter()
	drifted := []planner.Action{
		action(planner.Update, "file/etc/infer/a", "drift: content changed on node"),
		action(planner.Create, "service/infer", "drift: process gone"),
		action(planner.Update, "model/detector", "update: sha256:ab → sha256:cd"),
	}
	ticks := []struct {
		tick fakeTick
		err  error
	}{
		{fakeTick{took: 2 * time.Second, commit: "aaa", fetched: true, actions: drifted, downloaded: 1000,
			applied: []string{"file/etc/infer/a", "service/infer", "model/detector"}}, nil},
		{fakeTick{at: time.Minute, failedStep: "fetch"}, errors.New("fetch fleet repo: connection refused")},
		{fakeTick{at: 2 * time.Minute, failedStep: "open"}, errors.New("open state dir: permission denied")},
		{fakeTick{at: 3 * time.Minute, took: 500 * time.Millisecond, commit: "aaa", unchanged: 3}, nil},
	}
	for _, tk := range ticks {
		m.Observe(tk.tick.result(), tk.err)
	}
	got := scrape(t, m.Metrics)
	for series, want := range map[string]float64{
		`tend_reconcile_total{result="success"}`:               1,
		`tend_reconcile_total{result="error"}`:                 2,
		`tend_reconcile_total{result="noop"}`:                  1,
		`tend_reconcile_duration_seconds_count`:                4,
		`tend_reconcile_duration_seconds_sum`:                  2 + 1 + 1 + 0.5,
		`tend_drift_total{kind="file"}`:                        1,
		`tend_drift_total{kind="service"}`:                     1,
		`tend_drift_total{kind="model"}`:                       0,
		`tend_source_fetch_total{result="changed"}`:            1,
		`tend_source_fetch_total{result="unchanged"}`:          1,
		`tend_source_fetch_total{result="error"}`:              1, // not the tick that failed to open
		`tend_model_bytes_downloaded_total`:                    1000,
		`tend_last_success_timestamp_seconds`:                  float64(tickT0.Add(3*time.Minute+500*time.Millisecond).UnixNano()) / 1e9,
		`tend_applied_revision_info{revision="main@sha1:aaa"}`: 1,
	} {
		require.Equal(t, want, got[series], series)
	}
}

func TestMetricsCountDriftOnce(t *testing.T) {
	m := newMeter()
	drifted := fakeTick{commit: "aaa", actions: []planner.Action{action(planner.Delete, "file/etc/infer/extra", "drift: created on node")}}
	for i := range 3 { // suspended: seen, not reverted
		drifted.at = time.Duration(i) * time.Minute
		m.Observe(drifted.result(), nil)
	}
	require.Equal(t, 1.0, scrape(t, m.Metrics)[`tend_drift_total{kind="file"}`])
	drifted.at, drifted.applied = 3*time.Minute, []string{"file/etc/infer/extra"}
	m.Observe(drifted.result(), nil)
	drifted.at, drifted.applied = 4*time.Minute, nil
	m.Observe(drifted.result(), nil)
	require.Equal(t, 2.0, scrape(t, m.Metrics)[`tend_drift_total{kind="file"}`], "drift again after it was reverted")
}

func TestMetricsConvergence(t *testing.T) {
	newRev := []planner.Action{action(planner.Update, "file/etc/infer/a", "update: content changed in Git")}
	cases := []struct {
		name      string
		ticks     []fakeTick
		errs      []error
		wantCount float64
		wantSum   float64
	}{{
		name:  "no-op ticks never diverge",
		ticks: []fakeTick{{commit: "aaa"}, {at: time.Minute, commit: "aaa"}},
		errs:  []error{nil, nil},
	}, {
		name:      "a tick that applies everything converges",
		ticks:     []fakeTick{{took: 3 * time.Second, commit: "bbb", actions: newRev, applied: []string{"file/etc/infer/a"}}},
		errs:      []error{nil},
		wantCount: 1, wantSum: 3,
	}, {
		name: "error then success: once, from the start of the error to the end of the success",
		ticks: []fakeTick{
			{commit: "bbb", actions: newRev, failed: "file/etc/infer/a", failedStep: "apply"},
			{at: time.Minute, took: 2 * time.Second, commit: "bbb", actions: newRev, applied: []string{"file/etc/infer/a"}},
			{at: 2 * time.Minute, commit: "bbb"},
		},
		errs:      []error{errors.New("apply file/etc/infer/a: read-only file system"), nil, nil},
		wantCount: 1, wantSum: 62,
	}, {
		name: "suspended: planned but not applied has not converged",
		ticks: []fakeTick{
			{commit: "bbb", actions: newRev},
			{at: time.Minute, commit: "bbb", actions: newRev},
			{at: 10 * time.Minute, commit: "bbb", actions: newRev, applied: []string{"file/etc/infer/a"}},
		},
		errs:      []error{nil, nil, nil},
		wantCount: 1, wantSum: 601,
	}, {
		name:      "a failed fetch diverges too",
		ticks:     []fakeTick{{failedStep: "fetch"}, {at: 30 * time.Second, commit: "aaa"}},
		errs:      []error{errors.New("fetch fleet repo: connection refused"), nil},
		wantCount: 1, wantSum: 31,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newMeter()
			for i, tk := range c.ticks {
				m.Observe(tk.result(), c.errs[i])
			}
			got := scrape(t, m.Metrics)
			require.Equal(t, c.wantCount, got["tend_convergence_seconds_count"])
			require.Equal(t, c.wantSum, got["tend_convergence_seconds_sum"])
		})
	}
}

func TestMetricsAppliedRevisionSwitchesSeries(t *testing.T) {
	m := newMeter()
	m.SetApplied("main@sha1:aaa")
	m.Observe(fakeTick{commit: "bbb", fetched: true, actions: []planner.Action{action(planner.Update, "file/etc/infer/a", "update: content changed in Git")}, failed: "file/etc/infer/a", failedStep: "apply"}.result(),
		errors.New("apply file/etc/infer/a: no space left on device"))
	got := scrape(t, m.Metrics)
	require.Equal(t, 1.0, got[`tend_applied_revision_info{revision="main@sha1:aaa"}`], "a failed tick keeps the applied revision")
	require.NotContains(t, got, `tend_applied_revision_info{revision="main@sha1:bbb"}`)

	m.Observe(fakeTick{at: time.Minute, commit: "bbb", actions: []planner.Action{action(planner.Update, "file/etc/infer/a", "update: content changed in Git")}, applied: []string{"file/etc/infer/a"}}.result(), nil)
	got = scrape(t, m.Metrics)
	require.Equal(t, 1.0, got[`tend_applied_revision_info{revision="main@sha1:bbb"}`])
	require.NotContains(t, got, `tend_applied_revision_info{revision="main@sha1:aaa"}`, "only the current revision's series")
}

// meter counts ticks as the loop does: the status tracker's drift tracker
// says which drift events are new.
type meter struct {
	*Metrics
	tracker *Tracker
}

func newMeter() meter { return meter{Metrics: NewMetrics(), tracker: NewTracker("cam-017", "")} }

func (m meter) Observe(res *Tick, err error) {
	m.Metrics.Observe(res, err, m.tracker.Observe(res, err, ""))
}

// tend_service_restarts_total{service} exists at zero for every declared
// service from the first tick that declares it, and counts restarts.
func TestMetricsServiceRestarts(t *testing.T) {
	m := NewMetrics()
	m.Observe(&Tick{Declared: []string{planner.FileID("/etc/infer/a"), planner.ServiceID("infer")}}, nil, nil)
	got := scrape(t, m)
	v, ok := got[`tend_service_restarts_total{service="infer"}`]
	require.True(t, ok, "no series for a declared service")
	require.Zero(t, v)
	m.ServiceRestarted("infer")
	m.ServiceRestarted("infer")
	require.Equal(t, 2.0, scrape(t, m)[`tend_service_restarts_total{service="infer"}`])
}

// An offline device (a model's registry unreachable, its ref unchanged)
// succeeds: the gauge and the status warning say so until a tick reaches
// the registry again.
func TestRegistryUnreachableIsAWarning(t *testing.T) {
	m := newMeter()
	off := &Tick{Desired: &render.Desired{Offline: errors.New("model/yolo kept at sha256:0123456789ab (r/yolo:v1): registry unreachable: 503")}}
	m.Observe(off, nil)
	require.Equal(t, 1.0, scrape(t, m.Metrics)[`tend_registry_unreachable`])
	st := m.tracker.Status()
	require.Equal(t, ResultNoop, st.Result)
	require.Empty(t, st.LastError)
	require.Equal(t, "model/yolo kept at sha256:0123456789ab (r/yolo:v1): registry unreachable: 503", st.Warning)

	m.Observe(&Tick{Desired: &render.Desired{}}, nil)
	require.Zero(t, scrape(t, m.Metrics)[`tend_registry_unreachable`])
	require.Empty(t, m.tracker.Status().Warning)
}

// A model held only because every version it names was rolled back on the
// node is no unreachable registry.
func TestHeldByQuarantineIsNoUnreachableRegistry(t *testing.T) {
	m := newMeter()
	held := errors.New("model/m held: model/m 1.2.0 (sha256:6ab5) was rolled back on this node")
	m.Observe(&Tick{Desired: &render.Desired{Held: held, Quarantined: held, HeldByQuarantine: true}}, nil)
	require.Zero(t, scrape(t, m.Metrics)[`tend_registry_unreachable`])
	m.Observe(&Tick{Desired: &render.Desired{Held: errors.New("model/m held: registry down")}}, nil)
	require.Equal(t, 1.0, scrape(t, m.Metrics)[`tend_registry_unreachable`])
}

// tend_policy_skipped_total counts, by reason, every version a tick's
// render passed over: once per tick that passed over it, so a version
// passed over tick after tick goes on counting; a tick that stopped
// before its render counts none. The status warning keeps the quarantined
// warning beside the unverified ones, and says nothing once no version
// is passed over.
func TestMetricsCountPolicySkips(t *testing.T) {
	m := newMeter()
	quarantined := errors.New("model/a 1.4.0 (sha256:aaaaaaaaaaaa) was rolled back on this node at 2026-12-03T07:51:01Z: service/web did not become healthy; push a new version, or run tend retry model/a@sha256:aaaaaaaaaaaa")
	skips := []render.Skip{
		{ID: "model/a", Tag: "1.4.0", Digest: "sha256:" + strings.Repeat("a", 64), Reason: render.SkipQuarantined, Why: quarantined, Took: "1.2.1"},
		{ID: "model/a", Tag: "1.3.0", Digest: "sha256:" + strings.Repeat("b", 64), Reason: render.SkipUnverified, Why: errors.New("no cosign signature by /k.pub"), Took: "1.2.1"},
		{ID: "model/b", Tag: "2.0.0", Digest: "sha256:" + strings.Repeat("c", 64), Reason: render.SkipUnverified, Why: errors.New("no cosign signature by /k.pub"), Took: "1.0.0"},
	}
	d := &render.Desired{Skips: skips, Quarantined: quarantined, Unverified: errors.Join(skips[1], skips[2])}
	want := func(q, u float64) {
		t.Helper()
		got := scrape(t, m.Metrics)
		require.Equal(t, q, got[`tend_policy_skipped_total{reason="quarantined"}`])
		require.Equal(t, u, got[`tend_policy_skipped_total{reason="unverified"}`])
	}
	m.Observe(&Tick{Desired: d}, nil)
	want(1, 2)
	require.Equal(t, quarantined.Error()+"\n"+
		"model/a: skipped 1.3.0 (sha256:bbbbbbbbbbbb): no cosign signature by /k.pub; resolved 1.2.1\n"+
		"model/b: skipped 2.0.0 (sha256:cccccccccccc): no cosign signature by /k.pub; resolved 1.0.0", m.tracker.Status().Warning)
	m.Observe(&Tick{Desired: d}, nil)
	want(2, 4)
	m.Observe(&Tick{}, errors.New("fetch: unreachable")) // stopped before its render
	want(2, 4)
	require.NotEmpty(t, m.tracker.Status().Warning, "a tick that did not render knows nothing new")
	m.Observe(&Tick{Desired: &render.Desired{}}, nil)
	want(2, 4)
	require.Empty(t, m.tracker.Status().Warning)
}

// tend_release_lag_seconds says, when scraped, how long the release the
// device saw and has not applied has waited; tend_release_convergence_seconds
// observes each release once, from its first sight to the end of the tick
// that activated it. A tick that did not decide leaves the lag as it was.
func TestMetricsReleaseConvergenceAndLag(t *testing.T) {
	m := newMeter()
	now := tickT0
	m.SetClock(func() time.Time { return now })
	newRev := []planner.Action{action(planner.Update, "file/etc/infer/a", "update: content changed in Git")}
	lag := func() float64 { return scrape(t, m.Metrics)["tend_release_lag_seconds"] }

	seen := tickT0.Add(time.Minute)
	held := fakeTick{at: time.Minute, commit: "aaa"}.result()
	held.Release = &SeenRelease{FirstSeen: seen} // held, or staging: not activated
	m.Observe(held, nil)
	now = seen.Add(10 * time.Minute)
	require.Equal(t, 600.0, lag(), "read when scraped")

	m.Observe(fakeTick{at: 11 * time.Minute, failedStep: "fetch"}.result(), errors.New("fetch fleet repo: connection refused"))
	now = seen.Add(20 * time.Minute)
	require.Equal(t, 1200.0, lag(), "a tick that did not decide leaves the release waiting")

	failed := fakeTick{at: 20 * time.Minute, commit: "bbb", actions: newRev, failed: "file/etc/infer/a", failedStep: "apply"}.result()
	failed.Release = &SeenRelease{FirstSeen: seen}
	m.Observe(failed, errors.New("apply file/etc/infer/a: read-only file system"))
	require.Equal(t, 1200.0, lag())
	require.Zero(t, scrape(t, m.Metrics)["tend_release_convergence_seconds_count"], "a failed apply activated nothing")

	taken := fakeTick{at: 30 * time.Minute, took: 2 * time.Second, commit: "bbb", actions: newRev, applied: []string{"file/etc/infer/a"}}.result()
	taken.Release = &SeenRelease{FirstSeen: seen, Activated: true}
	m.Observe(taken, nil)
	now = seen.Add(time.Hour)
	got := scrape(t, m.Metrics)
	require.Equal(t, 1.0, got["tend_release_convergence_seconds_count"])
	require.Equal(t, (29*time.Minute + 2*time.Second).Seconds(), got["tend_release_convergence_seconds_sum"], "first sight to the end of the activating tick")
	require.Equal(t, 1.0, got[`tend_release_convergence_seconds_bucket{le="1800"}`])
	require.Zero(t, got[`tend_release_convergence_seconds_bucket{le="900"}`])
	require.Zero(t, got["tend_release_lag_seconds"], "converged")

	converged := fakeTick{at: 40 * time.Minute, commit: "bbb"}.result()
	converged.Release = &SeenRelease{} // the target is what the node applied
	m.Observe(converged, nil)
	got = scrape(t, m.Metrics)
	require.Zero(t, got["tend_release_lag_seconds"])
	require.Equal(t, 1.0, got["tend_release_convergence_seconds_count"], "once per release")

	// A first sight after now (the clock set back) is no negative lag.
	back := fakeTick{at: 50 * time.Minute, commit: "bbb"}.result()
	back.Release = &SeenRelease{FirstSeen: now.Add(time.Hour)}
	m.Observe(back, nil)
	require.Zero(t, lag())
}

// The stager's bytes and state are read when scraped: its bytes count in
// tend_stage_bytes_total and in tend_model_bytes_downloaded_total beside
// those of ticks; tend_staging is 1 while a release stages.
func TestMetricsReadTheStager(t *testing.T) {
	m := newMeter()
	var staged int64
	staging := false
	m.SetStager(func() int64 { return staged }, func() bool { return staging })
	m.Observe(fakeTick{commit: "aaa", downloaded: 1000}.result(), nil)
	got := scrape(t, m.Metrics)
	require.Zero(t, got["tend_stage_bytes_total"])
	require.Zero(t, got["tend_staging"])
	require.Equal(t, 1000.0, got["tend_model_bytes_downloaded_total"])

	staged, staging = 4096, true
	got = scrape(t, m.Metrics)
	require.Equal(t, 4096.0, got["tend_stage_bytes_total"])
	require.Equal(t, 1.0, got["tend_staging"])
	require.Equal(t, 5096.0, got["tend_model_bytes_downloaded_total"])

	staging = false
	require.Zero(t, scrape(t, m.Metrics)["tend_staging"])
}
