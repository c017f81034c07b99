package hub

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Log lines that anyone who reaches the hub can cause, one a request:
// each is let through once per key (remote and result) a window, at most
// logKeysPerWindow a window, and the rest counted.
const (
	msgReportRefused  = "report refused"
	msgReadRefused    = "read refused"
	msgReadFailed     = "read failed" // the database failed a read: one line a path a window
	msgWebhookDropped = "webhook event dropped"

	logWindow        = time.Minute
	logKeysPerWindow = 10
)

// logLimit writes one kind of log line: the first of each key in a window
// of logWindow, for at most logKeysPerWindow keys; the lines it holds back
// are counted in tend_hub_log_suppressed_total, and told in one summary
// line, with the same message and suppressed=K, once the window is over.
type logLimit struct {
	log        *slog.Logger
	msg        string
	now        func() time.Time
	suppressed prometheus.Counter

	mu     sync.Mutex
	start  time.Time       // of the window; zero before the first line
	keys   map[string]bool // logged in this window
	held   int             // lines held back in this window
	summed slog.Level      // the level of the summary: the highest held back
}

func newLogLimit(log *slog.Logger, msg string, now func() time.Time, m *boundMetrics) *logLimit {
	return &logLimit{log: log, msg: msg, now: now, suppressed: m.logSuppressed.WithLabelValues(msg), keys: map[string]bool{}, summed: slog.LevelDebug}
}

// Log writes the line msg with args at level unless a line of key was
// written in this window, or as many keys as a window allows.
func (l *logLimit) Log(ctx context.Context, level slog.Level, key string, args ...any) {
	now := l.now()
	l.mu.Lock()
	held, since, heldLevel := l.roll(now, false)
	pass := !l.keys[key] && len(l.keys) < logKeysPerWindow
	if pass {
		l.keys[key] = true
	} else {
		l.held++
		l.summed = max(l.summed, level)
	}
	l.mu.Unlock()
	l.summary(ctx, held, since, heldLevel)
	if pass {
		l.log.Log(ctx, level, l.msg, args...)
	} else {
		l.suppressed.Inc()
	}
}

// flush writes the summary of a window that is over, so that a flood that
// stopped is told too: the hub calls it every window, and at its close
// (final).
func (l *logLimit) flush(ctx context.Context, final bool) {
	now := l.now()
	l.mu.Lock()
	held, since, level := l.roll(now, final)
	l.mu.Unlock()
	l.summary(ctx, held, since, level)
}

// roll starts a new window when the current one is over (or ended, by
// force), and returns what the one that ended held back. l.mu is held.
func (l *logLimit) roll(now time.Time, force bool) (int, time.Time, slog.Level) {
	if !force && !l.start.IsZero() && now.Sub(l.start) < logWindow {
		return 0, time.Time{}, 0
	}
	held, since, level := l.held, l.start, l.summed
	l.start, l.held, l.summed = now, 0, slog.LevelDebug
	clear(l.keys)
	return held, since, level
}

func (l *logLimit) summary(ctx context.Context, held int, since time.Time, level slog.Level) {
	if held > 0 {
		l.log.Log(ctx, level, l.msg, "suppressed", held, "since", since.UTC().Format(time.RFC3339))
	}
}
