package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/notify"
	"github.com/tend-dev/tend/source"
)

// NotifyWindow is the least time between two ticks asked for by notify
// messages: a message inside the window after one is folded into one tick
// at the window's end.
const NotifyWindow = 5 * time.Second

// A notified revision the source does not have yet (CI notified before its
// push or its publish landed) is tried again: a tick after 2 s, then
// doubling up to 30 s between tries, while NotifyRetryFor has not passed
// since the message.
var notifyRetry = backoff.Exponential{Initial: 2 * time.Second, Max: 30 * time.Second}

// NotifyRetryFor is how long after a message the agent keeps trying again
// for the revision it named; then polling on the schedule takes over.
const NotifyRetryFor = 2 * time.Minute

// NotifyOptions tune the subscription of notify.mqtt; the zero value is
// what the agent uses. Tests set them.
type NotifyOptions struct {
	// Clock times the window; nil means the system's.
	Clock NotifyClock
	// Backoff is the wait before the n-th reconnection in a row; nil
	// means notify.DefaultBackoff.
	Backoff func(n int) time.Duration
}

// NotifyClock is the clock of the notify window.
type NotifyClock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d; stop cancels it.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// notifier turns the messages of a notify subscription into ticks: one
// at once, and at most one more per window, never for the applied
// revision. When a message names a revision and the tick after it finds
// the source still at the revision it had (the notify came before the
// push or the publish), it ticks again after a backoff, for up to
// NotifyRetryFor, and logs each try.
type notifier struct {
	trigger func() bool
	applied func() string
	count   func(result string)
	clock   NotifyClock
	log     *slog.Logger

	mu      sync.Mutex
	last    time.Time   // when the last notified tick was asked for
	pending func() bool // stops the tick due at the window's end; nil when none is
	target  string      // the revision the source named at the last tick that fetched, REF@sha1:COMMIT

	// The revision of the last message, while the source does not have it.
	want     source.Revision // zero when none is waited for
	base     string          // the source's target when the message came: no news until it moves
	since    time.Time       // when the message came
	deadline time.Time       // when the tries end
	tries    int             // ticks asked for after the first
	retry    func() bool     // stops the try due; nil when none is
}

// startNotify subscribes to cfg's topic; the returned func stops it.
func (l *Loop) startNotify(ctx context.Context, cfg manifest.MQTTNotify, log *slog.Logger) func() {
	n := &notifier{trigger: l.Trigger, applied: l.tracker.Applied, count: l.metrics.Notified, clock: l.opts.Notify.Clock, log: log}
	if n.clock == nil {
		n.clock = systemClock{}
	}
	l.notifier = n
	broker := cfg.URL // Validate refuses credentials in it
	l.tracker.SetNotify(status.Notify{Broker: broker, Topic: cfg.Topic, Since: status.RFC3339(time.Now()), Error: "connecting"})
	sub := &notify.Subscriber{
		Config:    cfg,
		ClientID:  "tend-" + l.r.Config.Device,
		Logger:    log,
		Backoff:   l.opts.Notify.Backoff,
		OnMessage: n.message,
		OnState: func(st notify.State) {
			s := status.Notify{Broker: broker, Topic: cfg.Topic, Connected: st.Connected, Since: status.RFC3339(st.Since)}
			if st.Err != nil {
				s.Error = st.Err.Error()
			}
			l.tracker.SetNotify(s)
		},
	}
	sub.Start(ctx)
	return func() {
		sub.Stop()
		n.stop()
	}
}

// message handles one message's payload.
func (n *notifier) message(payload []byte) {
	p, err := notify.ParsePayload(payload)
	if err != nil {
		// The payload is never trusted, nor logged: only its fault.
		n.log.Debug("notify: message ignored", keyError, err.Error())
		n.count(status.NotifyError)
		return
	}
	applied := n.applied()
	if p.Revision != "" && sameRevision(p.Revision, applied) {
		n.count(status.NotifySkipped)
		return
	}
	n.mu.Lock()
	now := n.clock.Now()
	n.await(p.Revision, applied, now)
	switch {
	case n.pending != nil:
		n.mu.Unlock()
		n.count(status.NotifySkipped)
		return
	case n.last.IsZero() || now.Sub(n.last) >= NotifyWindow:
		n.last = now
		n.mu.Unlock()
		if n.trigger() {
			n.count(status.NotifyTick)
		} else {
			n.count(status.NotifySkipped) // a tick was already due
		}
		return
	}
	n.pending = n.clock.AfterFunc(n.last.Add(NotifyWindow).Sub(now), n.due)
	n.mu.Unlock()
	n.count(status.NotifyTick)
}

// due asks for the tick held back to the window's end.
func (n *notifier) due() {
	n.mu.Lock()
	if n.pending == nil {
		n.mu.Unlock()
		return // stopped
	}
	n.pending, n.last = nil, n.clock.Now()
	n.mu.Unlock()
	n.trigger()
}

func (n *notifier) stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pending != nil {
		n.pending()
		n.pending = nil
	}
	n.stopRetry()
}

// await makes rev, a message's revision, the one waited for (see ticked),
// in place of any other; applied is the node's applied revision. A
// revision that is not REF@sha1:COMMIT or a commit (nothing to compare a
// source with), or that names another ref than the one the source follows
// (when both are named: HEAD may be any), is not waited for. The caller
// holds mu.
func (n *notifier) await(rev, applied string, now time.Time) {
	n.stopRetry()
	n.want, n.tries = source.Revision{}, 0
	r, err := source.ParseRevision(rev)
	if rev == "" || err != nil {
		return
	}
	base := n.target
	if base == "" {
		base = applied
	}
	if b, err := source.ParseRevision(base); err == nil && namedRef(r) && namedRef(b) && !r.SameRef(b) {
		return // another ref's commit: this device does not follow it
	}
	n.want, n.base, n.since, n.deadline = r, base, now, now.Add(NotifyRetryFor)
}

// ticked hears the target a tick found at the source ("" when the fetch
// failed). While a notified revision is waited for and the source has not
// moved from where it was when the message came, it asks for another
// tick after the backoff, until NotifyRetryFor has passed; the source
// naming that revision, or any other new one, ends the wait.
func (n *notifier) ticked(target string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if target != "" {
		n.target = target
	}
	if n.want.IsZero() || n.retry != nil || n.pending != nil {
		return // nothing waited for, or a tick is already due
	}
	want := wantName(n.want)
	t, err := source.ParseRevision(target)
	switch {
	case err == nil && t.SameCommit(n.want):
		if n.tries > 0 {
			n.log.Info("notify: the source has the notified revision now", keyRevision, want, "tries", n.tries)
		}
		n.want = source.Revision{}
		return
	case err == nil && n.base != "" && target != n.base:
		// The source moved on, to another revision: no longer
		// behind the message.
		n.want = source.Revision{}
		return
	}
	has := target
	if has == "" {
		has = "unknown (the fetch failed or was refused)"
	}
	now := n.clock.Now()
	if !now.Before(n.deadline) {
		n.log.Warn("notify: the source still does not have the notified revision; polling on schedule continues", keyRevision, want,
			"has", has, "waited", now.Sub(n.since).String())
		n.want = source.Revision{}
		return
	}
	n.tries++
	wait := min(notifyRetry.Delay(n.tries), n.deadline.Sub(now))
	n.log.Info("notify: the source does not have the notified revision yet (notified before it was pushed or published?); ticking again",
		keyRevision, want, "has", has, "in", wait.String(), "try", n.tries)
	n.retry = n.clock.AfterFunc(wait, n.again)
}

// again asks for the tick of a try.
func (n *notifier) again() {
	n.mu.Lock()
	if n.retry == nil {
		n.mu.Unlock()
		return // stopped
	}
	n.retry, n.last = nil, n.clock.Now()
	n.mu.Unlock()
	n.trigger()
}

// stopRetry cancels the try due, if one is; the caller holds mu.
func (n *notifier) stopRetry() {
	if n.retry != nil {
		n.retry()
		n.retry = nil
	}
}

// namedRef reports whether r names its ref: not the remote's default
// branch (HEAD), which may be any.
func namedRef(r source.Revision) bool {
	return r.Ref != "" && r.Ref != "HEAD"
}

// wantName is a waited-for revision as logs name it: the commit alone
// when the message named no ref.
func wantName(r source.Revision) string {
	if r.Ref == "" {
		return r.Commit
	}
	return r.String()
}

// sameRevision reports whether a notified revision names the applied one:
// the same REF@sha1:COMMIT, or its commit alone.
func sameRevision(notified, applied string) bool {
	if applied == "" {
		return false
	}
	if notified == applied {
		return true
	}
	a, err := source.ParseRevision(applied)
	return err == nil && (notified == a.Commit || notified == "sha1:"+a.Commit)
}
