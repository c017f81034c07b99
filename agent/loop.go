package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/reserve"
	"github.com/tend-dev/tend/internal/statedir"
)

// LoopOptions say when a Loop ticks and what it serves.
type LoopOptions struct {
	Schedule cron.Schedule
	// Jitter is the most a tick is delayed past its scheduled time, drawn
	// at random each tick so a fleet does not hit its Git server at once.
	Jitter time.Duration
	// TickTimeout bounds one reconcile; zero means DefaultTickTimeout.
	TickTimeout time.Duration
	// Backoff is how long to hold off after n consecutive failed ticks;
	// nil means DefaultBackoff. See tick.
	Backoff func(n int) time.Duration
	// Listen is the address of the status server (/healthz, /status,
	// /metrics, POST /reconcile); "" serves none.
	Listen string
	// Version is logged when the loop starts and shown in status.
	Version string
	// OnTick, if set, is called after every tick.
	OnTick func(*Result, error)
	// OnHeldOff, if set, is called when a scheduled tick is skipped
	// because it falls in the backoff after failures and the target did
	// not move.
	OnHeldOff func()
	// OnHold, if set, is called when such a tick reverted drift to the
	// applied revision (see Reconciler.Hold).
	OnHold func(*Result)
	// Notify tunes the subscription of notify.mqtt.
	Notify NotifyOptions
}

// Loop runs the reconciler on a schedule: Start, then Stop (or Run).
type Loop struct {
	r    *Reconciler
	opts LoopOptions

	trigger     chan struct{}
	tickStarted atomic.Int64 // unix nanoseconds; 0 between ticks

	// Made by Start.
	tracker  *status.Tracker
	metrics  *status.Metrics
	observed chan struct{} // closed once the first tick is in the tracker
	first    sync.Once
	cancel   context.CancelFunc
	done     chan struct{} // closed when the loop's goroutine ends
	stops    []func()      // what Start started besides the loop, in order

	// The loop goroutine's own state.
	notifier   *notifier // of notify.mqtt; nil without it
	failures   int       // consecutive failed ticks
	failedAt   time.Time // end of the last failed tick
	failedRev  string    // its target commit, "" when it had none
	failedGit  bool      // it failed to reach the fleet repo
	peeked     bool      // a backoff peek fetched the commit the next tick uses
	suspendLog bool      // suspension was logged
	lastStatus status.LastWriter
	disk       diskGuard
}

// DefaultTickTimeout bounds one reconcile when the loop sets none.
const DefaultTickTimeout = 10 * time.Minute

// NewLoop returns a loop running r as opts say. It does nothing until
// Start.
func NewLoop(r *Reconciler, opts LoopOptions) *Loop {
	return &Loop{r: r, opts: opts, trigger: make(chan struct{}, 1)}
}

// Trigger asks for a tick now (POST /reconcile, SIGHUP). Triggers during a
// tick are coalesced: at most one more tick is queued. It reports whether
// this call queued one.
func (l *Loop) Trigger() bool {
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

// Run starts the loop and stops it when ctx is done.
func (l *Loop) Run(ctx context.Context) error {
	if err := l.Start(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-l.done:
	}
	return l.Stop()
}

// Start takes the agent lock on stateDir (one agent per stateDir), starts
// watching services (adopting those a previous tend started), the status
// server and the reporter, and then reconciles at once and at every
// scheduled time until Stop. A failed tick is logged and the loop goes on:
// the node keeps what it last applied.
//
// The first tick is delayed by the jitter too, so a fleet that boots at
// once (a power cut at a site) does not hit its Git server at once.
func (l *Loop) Start(ctx context.Context) error {
	c := l.r.Config
	log := l.r.logger()
	if err := l.r.checkState(); err != nil {
		return err // a newer tend's stateDir: nothing is touched
	}
	unlock, err := applier.LockAgent(c.StateDir)
	if err != nil {
		return err
	}
	l.stops = append(l.stops, func() { _ = unlock() })
	if err := l.r.migrateOnStart(ctx); err != nil {
		l.undo()
		return err
	}
	log.Info("agent starting", keyDevice, c.Device, keySchedule, c.Schedule,
		keyJitter, l.opts.Jitter.String(), keyVersion, l.opts.Version)
	l.disk.reserve = reserve.New(statedir.Dir(c.StateDir).Reserve(), reserve.Size)
	l.disk.take(log)

	ctx, l.cancel = context.WithCancel(ctx)
	l.r.LogDrift = true // each drift is logged before the apply that reverts it
	if l.r.Supervisor == nil {
		// Watch services: adopt those a previous tend started, and
		// restart any that exits. Stopping the agent leaves them running.
		sup := NewSupervisor(c, log)
		if err := sup.Start(ctx); err != nil {
			log.Error("adopt services", keyError, err.Error())
		}
		l.r.Supervisor = sup
		l.stops = append(l.stops, func() { sup.Stop(); l.r.Supervisor = nil })
	}
	if err := l.serve(ctx, log); err != nil {
		l.cancel()
		l.cancel = nil // not started: Stop has nothing to stop
		l.undo()
		return err
	}
	if sup := l.r.Supervisor; sup != nil {
		sup.OnRestart(l.metrics.ServiceRestarted)
		// An instance removed outside tend is drift: a tick now reports
		// it and restores it.
		sup.OnRemoved(func(string) { l.Trigger() })
	}
	if l.r.Stager == nil {
		// Downloads run beside the ticks, which never wait for them.
		st := &Stager{Ready: func() { l.Trigger() }, Now: l.r.Now, Logger: log, Parallel: c.Models.Parallel}
		l.r.Stager = st
		l.stops = append(l.stops, func() { st.Stop(); l.r.stopSource(); l.r.Stager = nil })
	}
	if st := l.r.Stager; st != nil {
		l.watchStager(st)
	}
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		l.loop(ctx, log)
	}()
	return nil
}

// Stop ends the loop after the tick in progress (a plan that started
// applying finishes within its grace), stops the server, the reporter and
// the watching of services, which keep running, and releases the agent
// lock.
func (l *Loop) Stop() error {
	if l.cancel == nil {
		return errors.New("agent loop: Stop before Start")
	}
	l.cancel()
	<-l.done
	l.undo()
	l.r.logger().Info("agent stopped", keyDevice, l.r.Config.Device)
	return nil
}

// showStaging has the status show how the stager's release goes.
func (l *Loop) showStaging() {
	if st := l.r.Stager; st != nil {
		l.tracker.SetStaging(func() (status.Staging, bool) {
			s, ok := st.Status()
			return s.document(), ok
		})
	}
}

// undo stops what Start started besides the loop, last first.
func (l *Loop) undo() {
	for i := len(l.stops) - 1; i >= 0; i-- {
		l.stops[i]()
	}
	l.stops = nil
}

// loop ticks until ctx is done.
func (l *Loop) loop(ctx context.Context, log *slog.Logger) {
	next := time.Now()
	for {
		if l.opts.Jitter > 0 {
			next = next.Add(rand.N(l.opts.Jitter))
		}
		timer := time.NewTimer(time.Until(next))
		manual := false
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-l.trigger:
			timer.Stop()
			manual = true
		}
		l.tick(ctx, log, manual)
		next = l.opts.Schedule.Next(time.Now())
	}
}

// serve starts the status server and the reporter, which Stop stops. A
// status server that cannot listen fails the start: an agent whose
// endpoints are missing would be taken for a dead one by whatever watches
// them.
func (l *Loop) serve(ctx context.Context, log *slog.Logger) error {
	c := l.r.Config
	l.tracker = status.NewTracker(c.Device, l.opts.Version)
	l.tracker.SetLabels(c.Labels)
	l.metrics = status.NewMetrics()
	l.metrics.SetClock(l.r.Now)
	l.r.OnVerify(l.metrics.Verified)
	l.observed = make(chan struct{})
	if sup := l.r.Supervisor; sup != nil {
		l.tracker.SetInstances(sup.Instances)
	}
	suspended, _ := Suspended(c)
	l.metrics.SetSuspended(suspended)
	if inv, err := applier.LoadInventory(c.StateDir); err == nil && inv.Revision != "" {
		l.tracker.SetApplied(inv.Revision, inv.AppliedRelease().String())
		l.metrics.SetApplied(inv.Revision)
	}
	if l.opts.Listen != "" {
		srv := status.NewServer(l.opts.Listen, l.tracker, l.metrics, l.Trigger, l.Alive, log)
		addr, err := srv.Start(ctx)
		if err != nil {
			return fmt.Errorf("status server: %w; set listen: (or --listen) to another address, or to off for none", err)
		}
		log.Info("status server listening", keyListen, addr.String())
		l.stops = append(l.stops, srv.Stop)
	}
	if n := c.Notify; n != nil && n.MQTT != nil {
		// Polling on the schedule stays the floor: a broker down changes
		// nothing else.
		l.stops = append(l.stops, l.startNotify(ctx, *n.MQTT, log))
	}
	if r := c.Report; r != nil {
		rep, err := status.NewReporter(*r, c.StateDir, log)
		if err != nil {
			log.Error("status reports disabled", keyError, err.Error())
			return nil
		}
		// Nothing is reported before the first tick: the collector would
		// get an empty document.
		rep.Start(ctx, l.observed, l.tracker.Status, l.tracker.Changed())
		l.stops = append(l.stops, rep.Stop)
	}
	return nil
}

// watchStager makes the status and the metrics read st when they are
// read: its staging, its bytes, whether a release stages.
func (l *Loop) watchStager(st *Stager) {
	l.tracker.SetStaging(func() (status.Staging, bool) {
		s, ok := st.Status()
		return s.document(), ok
	})
	l.metrics.SetStager(st.Downloaded, st.Busy)
}

func (l *Loop) tickTimeout() time.Duration {
	if l.opts.TickTimeout <= 0 {
		return DefaultTickTimeout
	}
	return l.opts.TickTimeout
}
