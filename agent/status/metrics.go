package status

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tend-dev/tend/drift"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
	"github.com/tend-dev/tend/rollout"
)

// Results of a notify message, as tend_notify_total names them.
const (
	// NotifyTick: the message asked for a tick, at once or at the end of
	// the window.
	NotifyTick = "tick"
	// NotifySkipped: no tick of its own: its revision is the applied one,
	// or the tick it asks for is already due.
	NotifySkipped = "skipped"
	// NotifyError: a payload that is not {"revision": "…"}: ignored.
	NotifyError = "error"
)

// Metrics are the agent's Prometheus metrics, as DESIGN.md names them, in a
// registry of their own (plus Go runtime and process metrics). Every
// labelled series exists at zero from the start, so a dashboard or an alert
// sees a rate of 0, not "no data".
type Metrics struct {
	reg *prometheus.Registry

	reconciles  *prometheus.CounterVec
	duration    prometheus.Histogram
	drifts      *prometheus.CounterVec
	revision    *prometheus.GaugeVec
	lastSuccess prometheus.Gauge
	fetches     *prometheus.CounterVec
	convergence prometheus.Histogram
	release     prometheus.Histogram // tend_release_convergence_seconds
	restarts    *prometheus.CounterVec
	unreachable prometheus.Gauge
	suspended   prometheus.Gauge
	held        *prometheus.GaugeVec
	notified    *prometheus.CounterVec
	verified    *prometheus.CounterVec // tend_verify_total
	skipped     *prometheus.CounterVec // tend_policy_skipped_total

	// tickBytes are the model bytes ticks pulled; the stager's are read
	// from it when scraped.
	tickBytes atomic.Int64

	mu       sync.Mutex
	applied  string    // the revision tend_applied_revision_info names
	diverged time.Time // start of the first tick since convergence that had work or failed
	// waiting is when this device first saw the release it has not
	// applied yet; zero when it has none (tend_release_lag_seconds).
	waiting time.Time
	now     func() time.Time
	// staged and staging read the agent's stager (see SetStager); nil
	// without one.
	staged  func() int64
	staging func() bool
}

// ReleaseBuckets are the buckets of tend_release_convergence_seconds:
// from a release seen and taken at once (nothing to download) to one
// held for days by its rollout, or pulled over a thin link.
var ReleaseBuckets = []float64{1, 10, 30, 60, 5 * 60, 15 * 60, 30 * 60, 3600, 2 * 3600, 4 * 3600, 8 * 3600, 12 * 3600,
	24 * 3600, 2 * 24 * 3600, 4 * 24 * 3600, 7 * 24 * 3600, 14 * 24 * 3600}

// NewMetrics registers the agent's metrics in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tend_reconcile_total",
			Help: "Reconciles by result: success (actions applied), noop (nothing to do) or error.",
		}, []string{"result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tend_reconcile_duration_seconds",
			Help:    "How long one reconcile took, fetch to apply.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}),
		drifts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tend_drift_total",
			Help: "Drift seen on the node (a change made outside tend), by resource kind; drift seen again on later ticks counts once.",
		}, []string{"kind"}),
		revision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tend_applied_revision_info",
			Help: "The revision last applied in full (ref@sha1:commit), as the label of a series set to 1.",
		}, []string{"revision"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tend_last_success_timestamp_seconds",
			Help: "Unix time at which the last reconcile without error ended; 0 before the first.",
		}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tend_source_fetch_total",
			Help: "Fetches of the fleet repo by result: changed (a new commit was fetched), unchanged, or error (the repo could not be fetched; a commit refused on the node was fetched).",
		}, []string{"result"}),
		convergence: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tend_convergence_seconds",
			Help: "Time from the start of the first tick that saw something to do (a new revision, drift) or failed, " +
				"to the end of the first tick after it that ended with no error and nothing left to do.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 2 * 3600, 6 * 3600, 12 * 3600, 24 * 3600},
		}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tend_service_restarts_total",
			Help: "Restarts of a service's instances: after an exit, or in place of an instance that ran (an update, a planned restart, a rollback).",
		}, []string{"service"}),
		unreachable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tend_registry_unreachable",
			Help: "1 while the last rendered tick could not ask a model's registry (the model kept at its applied version, or held), else 0.",
		}),
		suspended: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tend_suspended",
			Help: "1 while the node is suspended (tend suspend, or suspend: true): changes are planned and reported, not applied.",
		}),
	}
	m.release = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "tend_release_convergence_seconds",
		Help: "Time from the moment this device first saw a release (a commit that changes it, a model or image digest newly resolved) " +
			"to the end of the tick that applied it in full: staging, rollout holds and failed attempts included.",
		Buckets: ReleaseBuckets,
	})
	downloaded := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tend_model_bytes_downloaded_total",
		Help: "Bytes of model artifacts pulled from registries, by ticks and by the staging of releases in the background.",
	}, func() float64 { return float64(m.tickBytes.Load() + m.stagedBytes()) })
	stageBytes := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tend_stage_bytes_total",
		Help: "Bytes of model artifacts the agent downloaded staging releases in the background (also counted in tend_model_bytes_downloaded_total).",
	}, func() float64 { return float64(m.stagedBytes()) })
	staging := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tend_staging",
		Help: "1 while a release stages in the background: not all it downloads is in the store yet (its last attempt may have failed and wait to be tried again), else 0.",
	}, m.stagingValue)
	lag := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tend_release_lag_seconds",
		Help: "How long the newest release this device saw and has not applied has waited, since it first saw it (held by its rollout, staging, failing); 0 when the device runs its target.",
	}, m.lagValue)
	m.held = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tend_release_held",
		Help: "1 while a release waits, by why: wave (its wave has not opened), window (outside the maintenance window), paused, gate, " +
			"quarantined (the newest version of a model was rolled back on this node), lock (a process holds the update lock of a service the release would stop or restart).",
	}, []string{"reason"})
	for _, c := range heldReasons {
		m.held.WithLabelValues(c)
	}
	m.notified = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tend_notify_total",
		Help: "Messages on the notify.mqtt topic by result: tick (asked for a tick, at once or at the end of the 5 s window), " +
			"skipped (no tick of its own: its revision is the applied one, or a tick is already due) or error (a malformed payload, ignored).",
	}, []string{"result"})
	for _, r := range []string{NotifyTick, NotifySkipped, NotifyError} {
		m.notified.WithLabelValues(r)
	}
	m.verified = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tend_verify_total",
		Help: "Signature verifications that asked a registry, by kind of artifact (source, model, image) and result (ok, failed); a digest verified once is remembered and not counted again.",
	}, []string{"kind", "result"})
	for _, k := range []string{"source", "model", "image"} {
		for _, r := range []string{"ok", "failed"} {
			m.verified.WithLabelValues(k, r)
		}
	}
	m.skipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tend_policy_skipped_total",
		Help: "Versions a model's semver policy passed over for the next highest matching tag, by reason: quarantined (rolled back on this node) " +
			"or unverified (not signed as verify asks); counted by every tick whose render passed over one.",
	}, []string{"reason"})
	for _, r := range render.SkipReasons {
		m.skipped.WithLabelValues(r)
	}
	for _, r := range []string{ResultSuccess, ResultError, ResultNoop} {
		m.reconciles.WithLabelValues(r)
	}
	for _, k := range []planner.Kind{planner.KindFile, planner.KindModel, planner.KindService} {
		m.drifts.WithLabelValues(k.String())
	}
	for _, r := range []string{FetchChanged, FetchUnchanged, FetchError} {
		m.fetches.WithLabelValues(r)
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.reconciles, m.duration, m.drifts, m.revision, m.lastSuccess, m.fetches, downloaded, m.convergence, m.restarts, m.unreachable, m.suspended, m.held,
		m.notified, m.release, stageBytes, staging, lag, m.verified, m.skipped,
	)
	return m
}

// Handler serves the metrics in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ServiceRestarted counts one restart of an instance of service (see
// service.Supervisor.OnRestart).
func (m *Metrics) ServiceRestarted(service string) {
	m.restarts.WithLabelValues(service).Inc()
}

// Notified counts one notify message by result (NotifyTick, NotifySkipped,
// NotifyError).
func (m *Metrics) Notified(result string) {
	m.notified.WithLabelValues(result).Inc()
}

// Verified counts one signature verification of an artifact of kind
// (source, model, image) with result (ok, failed).
func (m *Metrics) Verified(kind, result string) {
	m.verified.WithLabelValues(kind, result).Inc()
}

// SetSuspended sets tend_suspended.
func (m *Metrics) SetSuspended(suspended bool) {
	v := 0.0
	if suspended {
		v = 1
	}
	m.suspended.Set(v)
}

// SetClock sets the clock tend_release_lag_seconds is read with (the
// agent's); nil means time.Now.
func (m *Metrics) SetClock(now func() time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = now
}

// SetStager makes tend_stage_bytes_total (and
// tend_model_bytes_downloaded_total) add downloaded, the bytes the agent's
// stager downloaded since it was made, and tend_staging read staging,
// whether a release stages: both read when scraped.
func (m *Metrics) SetStager(downloaded func() int64, staging func() bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.staged, m.staging = downloaded, staging
}

func (m *Metrics) stagedBytes() int64 {
	m.mu.Lock()
	fn := m.staged
	m.mu.Unlock()
	if fn == nil {
		return 0
	}
	return fn()
}

func (m *Metrics) stagingValue() float64 {
	m.mu.Lock()
	fn := m.staging
	m.mu.Unlock()
	if fn != nil && fn() {
		return 1
	}
	return 0
}

// lagValue is tend_release_lag_seconds now: 0 without a release waiting,
// and never below 0 (a first sight after now: a clock set back).
func (m *Metrics) lagValue() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.waiting.IsZero() {
		return 0
	}
	now := time.Now
	if m.now != nil {
		now = m.now
	}
	return max(now().Sub(m.waiting).Seconds(), 0)
}

// SetApplied seeds tend_applied_revision_info with the revision read from
// the inventory when the agent starts.
func (m *Metrics) SetApplied(rev string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setApplied(rev)
}

// Observe counts one tick, and the drift events new in it (see
// Tracker.Observe).
func (m *Metrics) Observe(res *Tick, err error, fresh []drift.Event) {
	if res == nil {
		res = &Tick{}
	}
	end := tickEnd(res)
	m.reconciles.WithLabelValues(res.outcome(err)).Inc()
	m.duration.Observe(res.Duration.Seconds())
	if res.Fetch != "" {
		m.fetches.WithLabelValues(res.Fetch).Inc()
	}
	if res.Downloaded > 0 {
		m.tickBytes.Add(res.Downloaded)
	}
	for _, id := range res.Declared {
		if k, err := planner.KindOf(id); err == nil && k == planner.KindService {
			// Its series exists, at zero, from the first tick that declares it.
			m.restarts.WithLabelValues(planner.ServiceName(id))
		}
	}
	if res.Desired != nil {
		m.unreachable.Set(0)
		if res.Desired.Offline != nil || res.Desired.Held != nil && !res.Desired.HeldByQuarantine {
			m.unreachable.Set(1)
		}
	}
	if res.Plan != nil || res.Held != nil {
		// A tick that stopped before its plan, and before it decided to
		// hold a release, knows nothing new of the rollout.
		for _, c := range rollout.Causes {
			v := 0.0
			if res.Held != nil && res.Held.Cause == c {
				v = 1
			}
			m.held.WithLabelValues(c).Set(v)
		}
	}
	if res.Desired != nil {
		// A tick that stopped before its render knows nothing new of what
		// resolution passed over.
		v := 0.0
		if res.Desired.Quarantined != nil {
			v = 1
		}
		m.held.WithLabelValues(rollout.CauseQuarantined).Set(v)
		for _, s := range res.Desired.Skips {
			m.skipped.WithLabelValues(s.Reason).Inc()
		}
	}
	if err == nil {
		m.lastSuccess.Set(float64(end.UnixNano()) / 1e9)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range fresh {
		m.drifts.WithLabelValues(e.Kind).Inc()
	}
	done := settled(res, err)
	if done && res.Revision != "" {
		m.setApplied(res.Revision)
	}
	if m.diverged.IsZero() && (err != nil || (res.Plan != nil && !res.Plan.Empty())) {
		m.diverged = res.Started
		if m.diverged.IsZero() {
			m.diverged = end
		}
	}
	if done && !m.diverged.IsZero() {
		m.convergence.Observe(end.Sub(m.diverged).Seconds())
		m.diverged = time.Time{}
	}
	if r := res.Release; r != nil {
		// A tick that did not decide on its target's release leaves the
		// lag as it was: the release still waits.
		m.waiting = r.FirstSeen
		if r.Activated {
			m.waiting = time.Time{}
		}
		if r.Activated && !r.FirstSeen.IsZero() {
			m.release.Observe(max(end.Sub(r.FirstSeen).Seconds(), 0))
		}
	}
}

// ObserveHold counts what a tick held off by the failure backoff did
// (the agent's Reconciler.Hold): the drift events new in it and the bytes it
// pulled. It is not a reconcile: tend_reconcile_total does not count it.
func (m *Metrics) ObserveHold(res *Tick, fresh []drift.Event) {
	if res.Downloaded > 0 {
		m.tickBytes.Add(res.Downloaded)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range fresh {
		m.drifts.WithLabelValues(e.Kind).Inc()
	}
}

// setApplied moves tend_applied_revision_info to rev; the caller holds mu.
func (m *Metrics) setApplied(rev string) {
	if rev == m.applied || rev == "" {
		return
	}
	if m.applied != "" {
		m.revision.DeleteLabelValues(m.applied)
	}
	m.applied = rev
	m.revision.WithLabelValues(rev).Set(1)
}

// heldReasons are the reason labels of tend_release_held: the causes of a
// release held at a tick, and a version quarantined on this node.
var heldReasons = append(slices.Clone(rollout.Causes), rollout.CauseQuarantined)
