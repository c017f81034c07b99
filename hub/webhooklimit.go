package hub

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The webhook's budgets, token buckets on the hub's clock: a device (the
// one that reported a crash loop, or asked the verdict that found brakes
// tripped) posts at most webhookDeviceBurst events at once, then one
// every webhookDeviceEvery; the hub posts at most webhookTotalBurst
// events of each kind at once, then one every webhookTotalEvery. Each
// kind has its own, so that a storm of crash loops does not silence the
// brakes. Events beyond are dropped, counted and logged.
const (
	webhookDeviceBurst = 5
	webhookDeviceEvery = 5 * time.Minute
	webhookTotalBurst  = 20
	webhookTotalEvery  = 6 * time.Second
	// webhookDevices bounds the devices whose budgets are remembered;
	// past it, those with a full bucket are forgotten (a fresh one is
	// full too), and if none is, all are.
	webhookDevices = 10000
)

// How long an event is remembered as sent, by kind: brakes trip once for
// a release; a device's crash loop in a release is told again a day later.
// Rows older than webhookKeep are deleted.
const (
	webhookOnceBrakes    = 30 * 24 * time.Hour
	webhookOnceCrashLoop = 24 * time.Hour
	webhookKeep          = 30 * 24 * time.Hour
	webhookTrimEvery     = time.Hour
)

// Reasons a webhook event is dropped, as tend_hub_webhook_dropped_total
// counts them.
const (
	dropDeviceRate = "device_rate"
	dropTotalRate  = "total_rate"
	dropQueueFull  = "queue_full"
)

// webhookLimits are the webhook's token buckets.
type webhookLimits struct {
	mu      sync.Mutex
	devices map[string]*rate.Limiter
	total   map[string]*rate.Limiter // by kind
}

func newWebhookLimits() *webhookLimits {
	return &webhookLimits{devices: map[string]*rate.Limiter{}, total: map[string]*rate.Limiter{}}
}

// take takes a token from device's bucket and from kind's at now, or
// none and says which bucket was empty. undo gives both back.
func (l *webhookLimits) take(kind, device string, now time.Time) (undo func(), reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.devices[device]
	if d == nil {
		if len(l.devices) >= webhookDevices {
			l.forget(now)
		}
		d = rate.NewLimiter(rate.Every(webhookDeviceEvery), webhookDeviceBurst)
		l.devices[device] = d
	}
	t := l.total[kind]
	if t == nil {
		t = rate.NewLimiter(rate.Every(webhookTotalEvery), webhookTotalBurst)
		l.total[kind] = t
	}
	switch {
	case d.TokensAt(now) < 1:
		return nil, dropDeviceRate
	case t.TokensAt(now) < 1:
		return nil, dropTotalRate
	}
	// Both have a token, and l.mu keeps them: neither reservation waits.
	rd, rt := d.ReserveN(now, 1), t.ReserveN(now, 1)
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		rd.CancelAt(now)
		rt.CancelAt(now)
	}, ""
}

// forget drops the buckets that are full at now, or all of them when
// none is. l.mu is held.
func (l *webhookLimits) forget(now time.Time) {
	for k, d := range l.devices {
		if d.TokensAt(now) >= webhookDeviceBurst {
			delete(l.devices, k)
		}
	}
	if len(l.devices) >= webhookDevices {
		clear(l.devices)
	}
}

// webhookOnce is how long an event of kind is remembered as sent.
func webhookOnce(kind string) time.Duration {
	if kind == WebhookBrakes {
		return webhookOnceBrakes
	}
	return webhookOnceCrashLoop
}

// claimWebhook records that this hub sends the event of kind about
// subject at now, and says whether it is the one to: false when any hub
// on this database (this one before a restart, or another replica) sent
// it within webhookOnce(kind). One statement, so two replicas that claim
// at once do not both win.
func (s *Store) claimWebhook(ctx context.Context, kind, subject string, now time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO webhook_sent (kind, subject, at) VALUES ($1, $2, $3)
		ON CONFLICT (kind, subject) DO UPDATE SET at = excluded.at WHERE webhook_sent.at <= $4`,
		kind, subject, now.UnixNano(), now.Add(-webhookOnce(kind)).UnixNano())
	if err != nil {
		return false, fmt.Errorf("%s: record the webhook event %s %s: %w", s.display, kind, subject, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%s: record the webhook event %s %s: %w", s.display, kind, subject, err)
	}
	return n == 1, nil
}

// unclaimWebhook forgets a claim whose event was not sent after all (the
// queue was full), so that it may be sent when it comes again.
func (s *Store) unclaimWebhook(ctx context.Context, kind, subject string, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM webhook_sent WHERE kind = $1 AND subject = $2 AND at = $3`, kind, subject, at.UnixNano()); err != nil {
		return fmt.Errorf("%s: forget the webhook event %s %s: %w", s.display, kind, subject, err)
	}
	return nil
}

// trimWebhookSent deletes the events sent before before.
func (s *Store) trimWebhookSent(ctx context.Context, before time.Time) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM webhook_sent WHERE at < $1`, before.UnixNano()); err != nil {
		return fmt.Errorf("%s: trim the webhook events sent: %w", s.display, err)
	}
	return nil
}
