package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tend-dev/tend/api"
)

// WebhookEvent is what --webhook posts: Text is Slack's (and Mattermost's,
// and most chat webhooks') message; the other fields are for scripts.
type WebhookEvent struct {
	Text     string `json:"text"`
	Kind     string `json:"kind"` // brakes or crashloop
	Revision string `json:"revision,omitempty"`
	// Release is the key of the release (see api.ReleaseKey): the one
	// the brakes tripped for, or the one the device runs.
	Release  string   `json:"release,omitempty"`
	Device   string   `json:"device,omitempty"`
	Services []string `json:"services,omitempty"`
	At       string   `json:"at"` // RFC 3339
}

// Webhook event kinds.
const (
	WebhookBrakes    = "brakes"
	WebhookCrashLoop = "crashloop"
)

const (
	webhookQueue    = 64               // events waiting; more are dropped, and logged
	webhookTimeout  = 10 * time.Second // one attempt
	webhookAttempts = 3
	// webhookTripped bounds the releases remembered as announced.
	webhookTripped = 1000
)

// webhook posts events to one URL from its own goroutine, so that neither
// ingest nor a verdict ever waits for it. Each event is sent once by all
// the hubs on one database (see claimWebhook), within the budgets of
// webhookLimits. A nil *webhook posts nothing.
type webhook struct {
	url     string
	client  *http.Client
	store   *Store // nil: each event is sent by this process alone
	log     *slog.Logger
	now     func() time.Time
	queue   chan WebhookEvent
	done    chan struct{}
	retry   time.Duration // the first pause between attempts
	limits  *webhookLimits
	dropped *prometheus.CounterVec
	dropLog *logLimit
	trimmed time.Time // the last trim of webhook_sent; run's alone

	mu        sync.Mutex
	announced map[string]bool // releases whose trip was settled: posted, by this hub or another
	closed    bool
}

func newWebhook(url string, store *Store, log *slog.Logger, now func() time.Time, m *boundMetrics) *webhook {
	w := &webhook{url: url, client: &http.Client{Timeout: webhookTimeout}, store: store, log: log, now: now,
		queue: make(chan WebhookEvent, webhookQueue), done: make(chan struct{}), retry: time.Second, announced: map[string]bool{},
		limits: newWebhookLimits(), dropped: m.webhookDropped, dropLog: newLogLimit(log, msgWebhookDropped, now, m)}
	go w.run()
	return w
}

// tripped posts that the brakes tripped for v's release in v's rollout,
// once per release and rollout by all the hubs on the database. asker is the device whose verdict
// found it ("" for the read token), whose budget it takes.
func (w *webhook) tripped(ctx context.Context, asker string, v BrakesVerdict) {
	if w == nil {
		return
	}
	// Once per release and rollout: a trip in one rollout does not
	// silence another's.
	subject := v.Release
	if v.Rollout != "" {
		subject += " rollout/" + v.Rollout
	}
	w.mu.Lock()
	done := w.announced[subject]
	w.mu.Unlock()
	if done {
		return
	}
	name := v.Release
	if _, commit := api.ReleaseKey(v.Release).Commit(); commit && v.Revision != "" {
		name = v.Revision
	}
	e := WebhookEvent{Kind: WebhookBrakes, Revision: v.Revision, Release: v.Release,
		Text: fmt.Sprintf("tend: brakes tripped for release %s: %s; later waves hold until a new release (a fix or a revert)", name, v.Reason)}
	if !w.offer(ctx, asker, subject, e) {
		return // dropped: a later verdict may post it
	}
	w.mu.Lock()
	if len(w.announced) >= webhookTripped {
		clear(w.announced)
	}
	w.announced[subject] = true
	w.mu.Unlock()
}

// crashLoop posts that services of device, running release key at
// revision, went into a crash loop: once a day for the device, release
// and services, by all the hubs on the database.
func (w *webhook) crashLoop(ctx context.Context, device, revision string, key api.ReleaseKey, services []string) {
	if w == nil || len(services) == 0 {
		return
	}
	release := string(key)
	if release == "" {
		release = revision
	}
	e := WebhookEvent{Kind: WebhookCrashLoop, Device: device, Revision: revision, Release: string(key), Services: services,
		Text: fmt.Sprintf("tend: device %s is crash-looping %s at %s", device, strings.Join(services, ", "), revision)}
	w.offer(ctx, device, device+" "+release+" "+strings.Join(services, ","), e)
}

// offer queues e, about subject, for posting if device's budget and the
// kind's allow, and no hub on the database sent it already. It says
// whether the event is settled (queued now, or sent before); false when
// it was dropped.
func (w *webhook) offer(ctx context.Context, device, subject string, e WebhookEvent) bool {
	now := w.now()
	e.At = now.UTC().Format(time.RFC3339)
	undo, reason := w.limits.take(e.Kind, device, now)
	if reason != "" {
		w.drop(ctx, reason, device, e)
		return false
	}
	// Not cut short by a client that hangs up: a claim not made is an
	// event told twice.
	dbctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), webhookTimeout)
	defer cancel()
	won := true
	if w.store != nil {
		var err error
		if won, err = w.store.claimWebhook(dbctx, e.Kind, subject, now); err != nil {
			// Better told twice than not at all.
			w.log.Warn("webhook event not recorded as sent; posting it all the same", "kind", e.Kind, keyError, err.Error())
			won = true
		}
	}
	if !won {
		undo() // sent before: it takes no budget
		return true
	}
	if w.enqueue(e) {
		return true
	}
	undo()
	if w.store != nil {
		if err := w.store.unclaimWebhook(dbctx, e.Kind, subject, now); err != nil {
			w.log.Warn("webhook event dropped but still recorded as sent", "kind", e.Kind, keyError, err.Error())
		}
	}
	w.drop(ctx, dropQueueFull, device, e)
	return false
}

// enqueue queues e unless the queue is full; after close, it drops e
// and says nothing.
func (w *webhook) enqueue(e WebhookEvent) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return true
	}
	select {
	case w.queue <- e:
		return true
	default:
		return false
	}
}

// drop counts a dropped event, and logs it within dropLog's bounds.
func (w *webhook) drop(ctx context.Context, reason, device string, e WebhookEvent) {
	w.dropped.WithLabelValues(reason).Inc()
	w.dropLog.Log(ctx, slog.LevelWarn, reason+" "+e.Kind, "reason", reason, "kind", e.Kind, keyDevice, device, "release", e.Release)
}

func (w *webhook) run() {
	defer close(w.done)
	for e := range w.queue {
		w.trim()
		body, _ := json.Marshal(e)
		pause := w.retry
		for attempt := 1; ; attempt++ {
			err := w.post(body)
			if err == nil {
				break
			}
			if attempt == webhookAttempts {
				w.log.Warn("webhook not delivered", "kind", e.Kind, "attempts", attempt, keyError, err.Error())
				break
			}
			time.Sleep(pause)
			pause *= 2
		}
	}
}

func (w *webhook) post(body []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		// Not the *url.Error, which quotes the URL: a webhook's path is
		// its secret.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("post to %s: %w", webhookOrigin(w.url), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %d", webhookOrigin(w.url), resp.StatusCode)
	}
	return nil
}

// trim deletes the events sent before webhookKeep, at most once every
// webhookTrimEvery.
func (w *webhook) trim() {
	now := w.now()
	if w.store == nil || now.Sub(w.trimmed) < webhookTrimEvery {
		return
	}
	w.trimmed = now
	ctx, cancel := context.WithTimeout(context.Background(), webhookTimeout)
	defer cancel()
	if err := w.store.trimWebhookSent(ctx, now.Add(-webhookKeep)); err != nil {
		w.log.Warn("webhook events sent not trimmed", keyError, err.Error())
	}
}

// close stops taking events and waits for those queued to be posted; a
// second close only waits. It logs what the drop log held back.
func (w *webhook) close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	<-w.done
	w.dropLog.flush(context.Background(), true)
}

// webhookOrigin is a webhook URL as logs show it: scheme and host alone,
// for a webhook's path (Slack's) is its secret.
func webhookOrigin(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "the webhook"
	}
	return "the webhook at " + u.Scheme + "://" + u.Host
}
