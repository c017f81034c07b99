package agent

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
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
	// OnTick, if set, is called after every tick.
	OnTick func(*Result, error)
	// Version is logged when the loop starts.
	Version string
}

// DefaultTickTimeout bounds one reconcile when the loop sets none.
const DefaultTickTimeout = 10 * time.Minute

// Run reconciles at once, then at every scheduled time, until ctx is done.
// A failed tick is logged and the loop goes on: the node keeps what it last
// applied.
//
// The first tick is delayed by the jitter too, so a fleet that boots at
// once (a power cut at a site) does not hit its Git server at once.
func (l *Loop) Run(ctx context.Context) error {
	log := l.Reconciler.logger()
	log.Info("agent starting", keyDevice, l.Reconciler.Config.Device, keySchedule, l.Reconciler.Config.Schedule,
		keyJitter, l.Jitter.String(), keyVersion, l.Version)
	defer log.Info("agent stopped", keyDevice, l.Reconciler.Config.Device)
	if l.Reconciler.Supervisor == nil {
		// Watch services: adopt those a previous tend started, and
		// restart any that exits. Stopping the agent leaves them running.
		sup := applier.NewSupervisor(l.Reconciler.Config.StateDir, service.NewExec(applier.CgroupParent, log), log)
		if err := sup.Watch(ctx); err != nil {
			log.Error("adopt services", keyError, err.Error())
		}
		defer sup.Close()
		l.Reconciler.Supervisor = sup
		defer func() { l.Reconciler.Supervisor = nil }()
	}
	next := time.Now()
	for {
		if l.Jitter > 0 {
			next = next.Add(rand.N(l.Jitter))
		}
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		l.tick(ctx, log)
		next = l.Schedule.Next(time.Now())
	}
}

func (l *Loop) tick(parent context.Context, log *slog.Logger) {
	timeout := l.TickTimeout
	if timeout <= 0 {
		timeout = DefaultTickTimeout
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	res, err := l.Reconciler.Apply(ctx)
	if err != nil && parent.Err() != nil {
		log.Info("tick interrupted by shutdown; the node keeps what was applied", keyDevice, l.Reconciler.Config.Device)
		return
	}
	LogTick(log, l.Reconciler.Config.Device, res, err)
	if l.OnTick != nil {
		l.OnTick(res, err)
	}
}

// LogTick writes the one summary line of a tick, plus one line per drifted
// resource.
func LogTick(log *slog.Logger, device string, res *Result, err error) {
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
