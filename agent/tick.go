package agent

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/applier/service"
)

// Loop runs the reconciler on a schedule until ctx is done.
type Loop struct {
	Reconciler *Reconciler
	Schedule   cron.Schedule
	// Jitter is the most a tick is delayed past its scheduled time, drawn
	// at random each tick so a fleet does not hit its Git server at once.
	Jitter time.Duration
	// TickTimeout bounds one reconcile.
	TickTimeout time.Duration
	// Backoff is how long to hold off after n consecutive failed ticks;
	// nil means DefaultBackoff. See tick.
	Backoff func(n int) time.Duration
	// Listen is the address of the status server (/healthz, /status,
	// /metrics, POST /reconcile); "" serves none.
	Listen string
	// OnTick, if set, is called after every tick.
	OnTick func(*Result, error)
	// Version is logged when the loop starts and shown in status.
	Version string

	trigger     chan struct{}
	triggerOnce sync.Once
	tickStarted atomic.Int64 // unix nanoseconds; 0 between ticks

	// Status and metrics, made by Run.
	tracker   *Tracker
	metrics   *Metrics
	observed  chan struct{} // closed once the first tick is in the tracker
	firstOnce sync.Once

	failures   int       // consecutive failed ticks
	failedAt   time.Time // end of the last failed tick
	failedRev  string    // its target commit, "" when it had none
	failedGit  bool      // it failed to reach the fleet repo
	peeked     bool      // a backoff peek fetched the commit the next tick uses
	suspendLog bool      // suspension was logged
}

// DefaultTickTimeout bounds one reconcile when the loop sets none.
const DefaultTickTimeout = 10 * time.Minute

// DefaultBackoff holds off 10s after a failed tick, doubling with each
// further failure up to 5 minutes.
func DefaultBackoff(n int) time.Duration {
	d := 10 * time.Second
	for i := 1; i < n && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}

// Trigger asks for a tick now (POST /reconcile, SIGHUP). Triggers during a
// tick are coalesced: at most one more tick is queued. It reports whether
// this call queued one.
func (l *Loop) Trigger() bool {
	l.triggerOnce.Do(func() { l.trigger = make(chan struct{}, 1) })
	select {
	case l.trigger <- struct{}{}:
		return true
	default:
		return false
	}
}

// Alive reports whether the loop is making progress: not stuck in a tick
// for longer than the tick timeout allows. /healthz answers with it.
func (l *Loop) Alive() bool {
	started := l.tickStarted.Load()
	return started == 0 || time.Since(time.Unix(0, started)) < l.tickTimeout()+time.Minute
}

// Run reconciles at once, then at every scheduled time, until ctx is done.
// A failed tick is logged and the loop goes on: the node keeps what it last
// applied.
//
// The first tick is delayed by the jitter too, so a fleet that boots at
// once (a power cut at a site) does not hit its Git server at once.
func (l *Loop) Run(ctx context.Context) error {
	l.triggerOnce.Do(func() { l.trigger = make(chan struct{}, 1) })
	c := l.Reconciler.Config
	log := l.Reconciler.logger()
	unlock, err := applier.LockAgent(c.StateDir)
	if err != nil {
		return err
	}
	defer func() { _ = unlock() }()
	log.Info("agent starting", keyDevice, c.Device, keySchedule, c.Schedule,
		keyJitter, l.Jitter.String(), keyVersion, l.Version)
	defer log.Info("agent stopped", keyDevice, c.Device)

	if l.Reconciler.Supervisor == nil {
		// Watch services: adopt those a previous tend started, and
		// restart any that exits. Stopping the agent leaves them running.
		sup := applier.NewSupervisor(c.StateDir, service.NewExec(applier.CgroupParent, log), log)
		if err := sup.Watch(ctx); err != nil {
			log.Error("adopt services", keyError, err.Error())
		}
		defer sup.Close()
		l.Reconciler.Supervisor = sup
		defer func() { l.Reconciler.Supervisor = nil }()
	}
	stop := l.serve(ctx, log)
	defer stop()

	next := time.Now()
	for {
		if l.Jitter > 0 {
			next = next.Add(rand.N(l.Jitter))
		}
		timer := time.NewTimer(time.Until(next))
		manual := false
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		case <-l.trigger:
			timer.Stop()
			manual = true
		}
		l.tick(ctx, log, manual)
		next = l.Schedule.Next(time.Now())
	}
}

// serve starts the status server and the reporter, and returns what stops
// them. A status server that cannot listen is logged, not fatal: a device
// keeps being reconciled without its endpoints.
func (l *Loop) serve(ctx context.Context, log *slog.Logger) func() {
	c := l.Reconciler.Config
	l.tracker = NewTracker(c.Device, l.Version)
	l.metrics = NewMetrics()
	l.observed = make(chan struct{})
	if inv, err := applier.LoadInventory(c.StateDir); err == nil && inv.Revision != "" {
		l.tracker.SetApplied(inv.Revision)
		l.metrics.SetApplied(inv.Revision)
	}
	var stops []func()
	if l.Listen != "" {
		srv := NewServer(l.Listen, l.tracker, l.metrics, l.Trigger, l.Alive, log)
		if addr, err := srv.Start(); err != nil {
			log.Error("status server not started; reconciling without it", keyListen, l.Listen, keyError, err.Error())
		} else {
			log.Info("status server listening", keyListen, addr.String())
			stops = append(stops, func() {
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			})
		}
	}
	if r := c.Report; r != nil {
		rep, err := NewReporter(*r, c.StateDir, log)
		if err != nil {
			log.Error("status reports disabled", keyError, err.Error())
		} else {
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				// Nothing is reported before the first tick: the
				// collector would get an empty document.
				select {
				case <-rctx.Done():
					return
				case <-l.observed:
				}
				rep.Run(rctx, l.tracker.Status, l.tracker.Changed())
			}()
			stops = append(stops, func() { cancel(); <-done })
		}
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

func (l *Loop) tickTimeout() time.Duration {
	if l.TickTimeout <= 0 {
		return DefaultTickTimeout
	}
	return l.TickTimeout
}

// tick runs one reconcile, or only a plan while suspended.
//
// After consecutive failures the loop holds off (Backoff): a scheduled
// tick inside the hold-off only looks at the target revision, and runs in
// full only when that moved, so a new commit is tried at once whatever the
// backoff. A manual trigger always runs in full.
func (l *Loop) tick(parent context.Context, log *slog.Logger, manual bool) {
	l.tickStarted.Store(time.Now().UnixNano())
	defer l.tickStarted.Store(0)
	ctx, cancel := context.WithTimeout(parent, l.tickTimeout())
	defer cancel()
	if !manual && l.failures > 0 && l.holdOff(ctx, log) {
		return
	}
	suspended, why := Suspended(l.Reconciler.Config)
	var res *Result
	var err error
	if suspended {
		res, err = l.Reconciler.Plan(ctx)
		if !l.suspendLog {
			log.Warn("suspended: changes are planned and reported, not applied", keyDevice, l.Reconciler.Config.Device, keyReason, why)
			l.suspendLog = true
		}
	} else {
		res, err = l.Reconciler.Apply(ctx)
		l.suspendLog = false
	}
	if err != nil && parent.Err() != nil {
		log.Info("tick interrupted by shutdown; the node keeps what was applied", keyDevice, l.Reconciler.Config.Device)
		return
	}
	if l.peeked && res.Snapshot != nil {
		res.Snapshot.Fetched = true // the peek fetched it: this tick's metrics say so
	}
	l.peeked = false
	if err != nil {
		l.failures++
		l.failedAt = time.Now()
		l.failedRev, l.failedGit = "", res.FailedStep == "fetch"
		if res.Snapshot != nil {
			l.failedRev = res.Snapshot.Revision
		}
	} else {
		l.failures = 0
	}
	LogTick(log, l.Reconciler.Config.Device, res, err, suspended)
	if l.tracker != nil {
		l.tracker.Observe(res, err, suspended)
		l.metrics.Observe(res, err)
		l.firstOnce.Do(func() { close(l.observed) })
	}
	if l.OnTick != nil {
		l.OnTick(res, err)
	}
}

// holdOff reports whether this tick falls in the backoff after failures
// and the target revision has not moved since the last failure.
func (l *Loop) holdOff(ctx context.Context, log *slog.Logger) bool {
	backoff := l.Backoff
	if backoff == nil {
		backoff = DefaultBackoff
	}
	until := l.failedAt.Add(backoff(l.failures))
	if !time.Now().Before(until) {
		return false
	}
	snap, err := l.Reconciler.Snapshot(ctx)
	if err == nil && (snap.Revision != l.failedRev || l.failedGit) {
		l.peeked = snap.Fetched
		return false // a new commit, or the repo is back: try now
	}
	log.Debug("backing off after failures", keyDevice, l.Reconciler.Config.Device, "failures", l.failures,
		"until", until.Format(time.RFC3339))
	return true
}

// LogTick writes the one summary line of a tick, plus one line per drifted
// resource.
func LogTick(log *slog.Logger, device string, res *Result, err error, suspended bool) {
	attrs := []any{keyDevice, device, keyResult, res.Outcome(err), keyDuration, res.Duration.Round(time.Millisecond).String()}
	if res.Snapshot != nil {
		attrs = append(attrs, keyRevision, Revision(res.Snapshot), keyFetched, res.Snapshot.Fetched)
	}
	for _, d := range res.Drift {
		log.Warn("drift", keyDevice, device, keyResource, d.Resource, keyReason, d.Reason)
	}
	if res.Plan != nil {
		s := res.Plan.Summary()
		attrs = append(attrs, keyAdd, s.Add, keyChange, s.Change, keyDelete, s.Delete, keyUnchanged, s.Unchanged, keyDrift, len(res.Drift))
	}
	if res.Downloaded > 0 {
		attrs = append(attrs, keyDownloaded, res.Downloaded)
	}
	if suspended {
		attrs = append(attrs, keySuspended, true)
	}
	if err != nil {
		log.Error("reconcile failed; the node keeps its last applied state", append(attrs, keyError, err.Error())...)
		return
	}
	log.Info("reconciled", attrs...)
}

// ParseSchedule parses a robfig/cron spec ("@every 30s", "*/5 * * * *").
func ParseSchedule(spec string) (cron.Schedule, error) {
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("invalid schedule %q: %w", spec, err)
	}
	return s, nil
}
