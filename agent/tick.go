package agent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/planner"
)

// DefaultBackoff holds off 10s after a failed tick, doubling with each
// further failure up to 5 minutes.
var DefaultBackoff = backoff.Exponential{Initial: 10 * time.Second, Max: 5 * time.Minute}.Delay

// tick runs one reconcile, or only a plan while suspended.
//
// After consecutive failures the loop holds off (Backoff): a scheduled
// tick inside the hold-off only looks at the target revision, and runs in
// full only when that moved, so a new commit is tried at once whatever the
// backoff; otherwise it only reverts drift to the applied revision
// (Reconciler.Hold). A manual trigger always runs in full.
func (l *Loop) tick(parent context.Context, log *slog.Logger, manual bool) {
	l.tickStarted.Store(time.Now().UnixNano())
	defer l.tickStarted.Store(0)
	ctx, cancel := context.WithTimeout(parent, l.tickTimeout())
	defer cancel()
	if !manual && l.failures > 0 && l.holdOff(ctx, log) {
		l.holdDrift(ctx, log)
		if l.opts.OnHeldOff != nil {
			l.opts.OnHeldOff()
		}
		return
	}
	suspended, why := Suspended(l.r.Config)
	var res *Result
	var err error
	if suspended {
		res, err = l.r.Plan(ctx)
		if skipped := (*planner.SkippedError)(nil); errors.As(err, &skipped) {
			err = nil // held or failing actions are pending like the rest: a suspended tick fails nothing
		}
		if !l.suspendLog {
			log.Warn("suspended: changes are planned and reported, not applied", keyDevice, l.r.Config.Device, keyReason, why)
			l.suspendLog = true
		}
	} else {
		res, err = l.disk.apply(ctx, log, l.r.Apply)
		l.suspendLog = false
	}
	l.disk.take(log)
	if err != nil && parent.Err() != nil {
		log.Info("tick interrupted by shutdown; the node keeps what was applied", keyDevice, l.r.Config.Device)
		return
	}
	if l.peeked && res.Snapshot != nil {
		res.Snapshot.Fetched = true // the peek fetched it: this tick's metrics say so
	}
	l.peeked = false
	if err != nil {
		l.failures++
		l.failedAt = time.Now()
		l.failedRev, l.failedGit = "", res.FailedStep == StepFetch
		if res.Snapshot != nil {
			l.failedRev = res.Snapshot.Revision.Commit
		}
	} else {
		l.failures = 0
	}
	LogTick(log, l.r.Config.Device, res, err, suspended)
	if l.tracker != nil {
		st := statusTick(res)
		st.DiskFull = l.disk.full
		fresh := l.tracker.Observe(st, err, why)
		l.metrics.SetSuspended(suspended)
		l.metrics.Observe(st, err, fresh)
		l.lastStatus.Write(log, l.r.Config, l.tracker.Status(), time.Now())
		l.first.Do(func() { close(l.observed) })
	}
	if l.notifier != nil {
		l.notifier.ticked(tickTarget(res))
	}
	if l.opts.OnTick != nil {
		l.opts.OnTick(res, err)
	}
}

// tickTarget is the revision a tick found its source naming (the release
// a rollout held, when one did), or "" when it does not know: the fetch
// failed, or the target was refused and the node held.
func tickTarget(res *Result) string {
	switch {
	case res.Held != nil:
		return res.Held.Revision
	case res.Snapshot == nil || res.Snapshot.Stale != nil || res.FailedStep == StepFetch:
		return ""
	}
	return res.Snapshot.Revision.String()
}

// holdOff reports whether this tick falls in the backoff after failures
// and the target revision has not moved since the last failure.
func (l *Loop) holdOff(ctx context.Context, log *slog.Logger) bool {
	delay := l.opts.Backoff
	if delay == nil {
		delay = DefaultBackoff
	}
	until := l.failedAt.Add(delay(l.failures))
	if !time.Now().Before(until) {
		return false
	}
	snap, err := l.r.Snapshot(ctx)
	if err == nil && (snap.Revision.Commit != l.failedRev || l.failedGit) {
		l.peeked = snap.Fetched
		return false // a new commit, or the repo is back: try now
	}
	log.Debug("backing off after failures", keyDevice, l.r.Config.Device, "failures", l.failures,
		"until", until.Format(time.RFC3339))
	return true
}

// LogTick writes the one summary line of a tick. The drifted resources
// were logged when planned, before the apply (Reconciler.LogDrift).
func LogTick(log *slog.Logger, device string, res *Result, err error, suspended bool) {
	outcome := res.Outcome(err)
	if err == nil && res.staging() {
		outcome = status.ResultStaging // as the status says it
	}
	attrs := []any{keyDevice, device, keyResult, outcome, keyDuration, res.Duration.Round(time.Millisecond).String()}
	if res.Snapshot != nil {
		attrs = append(attrs, keyRevision, res.Snapshot.Revision.String(), keyFetched, res.Snapshot.Fetched)
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
	if res.Held != nil {
		attrs = append(attrs, keyHeld, res.Held.Revision, keyReason, res.Held.Reason)
	}
	if off := res.Offline(); off != nil {
		log.Warn("registry unreachable; models kept at their applied version", keyDevice, device, keyReason, off.Error())
	}
	if q := res.Quarantined(); q != nil {
		log.Warn("newest version rolled back here; models kept off it", keyDevice, device, keyReason, q.Error())
	}
	if u := res.Unverified(); u != nil {
		log.Warn("newest version not signed as verify asks; models kept off it", keyDevice, device, keyReason, u.Error())
	}
	if a := res.ActiveUnverified(); a != nil {
		log.Warn("the running version no longer verifies; it keeps running, and a new version must verify", keyDevice, device, keyReason, a.Error())
	}
	if err != nil {
		log.Error("reconcile failed; the node keeps its last applied state", append(attrs, keyError, err.Error())...)
		return
	}
	log.Info("reconciled", attrs...)
}
