package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/notify"
	"github.com/tend-dev/tend/source"
)

// NotifyWindow is the least time between two ticks asked for by notify
// messages: a message inside the window after one is folded into one tick
// at the window's end.
const NotifyWindow = 5 * time.Second

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
// revision.
type notifier struct {
	trigger func() bool
	applied func() string
	count   func(result string)
	clock   NotifyClock
	log     *slog.Logger

	mu      sync.Mutex
	last    time.Time   // when the last notified tick was asked for
	pending func() bool // stops the tick due at the window's end; nil when none is
}

// startNotify subscribes to cfg's topic; the returned func stops it.
func (l *Loop) startNotify(ctx context.Context, cfg manifest.MQTTNotify, log *slog.Logger) func() {
	n := &notifier{trigger: l.Trigger, applied: l.tracker.Applied, count: l.metrics.Notified, clock: l.opts.Notify.Clock, log: log}
	if n.clock == nil {
		n.clock = systemClock{}
	}
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
	if p.Revision != "" && sameRevision(p.Revision, n.applied()) {
		n.count(status.NotifySkipped)
		return
	}
	n.mu.Lock()
	now := n.clock.Now()
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
