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
// ingest nor a verdict ever waits for it. A nil *webhook posts nothing.
type webhook struct {
	url    string
	client *http.Client
	log    *slog.Logger
	now    func() time.Time
	queue  chan WebhookEvent
	done   chan struct{}
	retry  time.Duration // the first pause between attempts

	mu        sync.Mutex
	announced map[string]bool // releases whose trip was posted
	closed    bool
}

func newWebhook(url string, log *slog.Logger, now func() time.Time) *webhook {
	w := &webhook{url: url, client: &http.Client{Timeout: webhookTimeout}, log: log, now: now,
		queue: make(chan WebhookEvent, webhookQueue), done: make(chan struct{}), retry: time.Second, announced: map[string]bool{}}
	go w.run()
	return w
}

// tripped posts that the brakes tripped for v's release, once per release
// in this hub's life (each replica of a hub posts its own).
func (w *webhook) tripped(v BrakesVerdict) {
	if w == nil {
		return
	}
	w.mu.Lock()
	if w.announced[v.Release] {
		w.mu.Unlock()
		return
	}
	if len(w.announced) >= webhookTripped {
		clear(w.announced)
	}
	w.announced[v.Release] = true
	w.mu.Unlock()
	name := v.Release
	if _, commit := api.ReleaseKey(v.Release).Commit(); commit && v.Revision != "" {
		name = v.Revision
	}
	w.send(WebhookEvent{Kind: WebhookBrakes, Revision: v.Revision, Release: v.Release,
		Text: fmt.Sprintf("tend: brakes tripped for release %s: %s; later waves hold until a new release (a fix or a revert)", name, v.Reason)})
}

// crashLoop posts that services of device, running release key at
// revision, went into a crash loop.
func (w *webhook) crashLoop(device, revision string, key api.ReleaseKey, services []string) {
	if w == nil || len(services) == 0 {
		return
	}
	w.send(WebhookEvent{Kind: WebhookCrashLoop, Device: device, Revision: revision, Release: string(key), Services: services,
		Text: fmt.Sprintf("tend: device %s is crash-looping %s at %s", device, strings.Join(services, ", "), revision)})
}

func (w *webhook) send(e WebhookEvent) {
	e.At = w.now().UTC().Format(time.RFC3339)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	select {
	case w.queue <- e:
	default:
		w.log.Warn("webhook queue full; event dropped", "kind", e.Kind, "text", e.Text)
	}
}

func (w *webhook) run() {
	defer close(w.done)
	for e := range w.queue {
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

// close stops taking events and waits for those queued to be posted; a
// second close only waits.
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
