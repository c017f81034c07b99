package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
)

// receiver counts the webhook events posted to it, by kind and release.
type receiver struct {
	mu    sync.Mutex
	posts map[string]int
	url   string
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{posts: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e WebhookEvent
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &e); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.posts[e.Kind+" "+e.Device+" "+e.Release]++
		rc.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/services/T0/B0/secret"
	return rc
}

// total is the events posted; each is the number of each.
func (rc *receiver) total() (n int, each map[string]int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	each = map[string]int{}
	for k, v := range rc.posts {
		n += v
		each[k] = v
	}
	return n, each
}

// webhookServer is a Server on store posting to rc on clock c.
func webhookServer(t *testing.T, store *Store, rc *receiver, c *clock, log *slog.Logger) *Server {
	t.Helper()
	srv, err := NewServer(store, Options{PublicRead: true, Now: c.now, Webhook: rc.url, Log: log})
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv
}

func failedRelease(i int) BrakesVerdict {
	return BrakesVerdict{Release: fmt.Sprintf("model/made-up@sha256:%064x", i), Tripped: true, Reason: "1 of 1 wave-0 devices failed it (maxFailed 0)"}
}

// 3,000 made-up failed releases, and 3,000 crash loops, post no more than
// the budgets: from one device, webhookDeviceBurst; from as many devices,
// webhookTotalBurst of each kind; then one every webhookTotalEvery. The
// rest are counted dropped, and told in a bounded number of log lines.
func TestWebhookBudgets(t *testing.T) {
	ctx := context.Background()
	const n = 3000
	for _, c := range []struct {
		name    string
		devices int
		// posts are the events posted at first (of 2×3,000), then of
		// 3,000 more brakes a minute on, from devices with a full budget.
		posts, later int
		reason       string
	}{
		// Brakes and crash loops share the device's budget; a minute
		// on, the brakes' budget is full again.
		{"one device", 1, webhookDeviceBurst, webhookTotalBurst, dropDeviceRate},
		// Each kind has its budget; a minute on, the brakes' has a
		// token every 6 s.
		{"a device each", n, 2 * webhookTotalBurst, int(time.Minute / webhookTotalEvery), dropTotalRate},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, err := Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
			require.NoError(t, err)
			t.Cleanup(func() { store.Close() })
			rc := newReceiver(t)
			clk := &clock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
			logs := &lineCounter{}
			srv := webhookServer(t, store, rc, clk, slog.New(slog.NewJSONHandler(logs, nil)))
			for i := range n {
				device := fmt.Sprintf("cam-%d", i%c.devices)
				srv.webhook.tripped(ctx, device, failedRelease(i))
				srv.webhook.crashLoop(ctx, device, rev1, api.ReleaseKey(fmt.Sprintf("commit:%040x", i)), []string{"service:web"})
			}
			clk.add(time.Minute)
			for i := range n {
				srv.webhook.tripped(ctx, fmt.Sprintf("later-%d", i), failedRelease(n+i))
			}
			srv.Close() // posts what was queued
			posts, each := rc.total()
			assert.Equal(t, c.posts+c.later, posts)
			for k, v := range each {
				assert.Equal(t, 1, v, "posted twice: %s", k)
			}
			m := scrape(t, srv)
			dropped := m[`tend_hub_webhook_dropped_total{reason="device_rate"}`] + m[`tend_hub_webhook_dropped_total{reason="total_rate"}`] + m[`tend_hub_webhook_dropped_total{reason="queue_full"}`]
			assert.Equal(t, float64(3*n-posts), dropped)
			assert.Positive(t, m[`tend_hub_webhook_dropped_total{reason="`+c.reason+`"}`])
			assert.Zero(t, m[`tend_hub_webhook_dropped_total{reason="queue_full"}`])
			lines, summaries, suppressed := logs.count(msgWebhookDropped)
			assert.LessOrEqual(t, lines, 10, "dropped events are logged a few a minute")
			assert.Equal(t, dropped, float64(lines-summaries)+suppressed, "every dropped event is logged or told in a summary")
		})
	}
}

// An event is posted once by all the hubs on one database: not again by a
// hub restarted on it, and once by two replicas that find it at once. A
// crash loop is told again a day later; brakes are not.
func TestWebhookSentOnceAcrossRestartsAndReplicas(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		store, err := Open(ctx, dbURL)
		require.NoError(t, err)
		t.Cleanup(func() { store.Close() })
		rc := newReceiver(t)
		clk := &clock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
		loop := func(srv *Server, device string) {
			srv.webhook.crashLoop(ctx, device, rev1, api.RevisionRelease(rev1), []string{"service:web"})
		}

		first := webhookServer(t, store, rc, clk, nil)
		first.webhook.tripped(ctx, "cam-1", failedRelease(1))
		loop(first, "cam-1")
		first.Close()
		posts, _ := rc.total()
		require.Equal(t, 2, posts)

		restarted := webhookServer(t, store, rc, clk, nil)
		restarted.webhook.tripped(ctx, "cam-1", failedRelease(1))
		loop(restarted, "cam-1")
		restarted.Close()
		posts, _ = rc.total()
		assert.Equal(t, 2, posts, "a restarted hub posts nothing again")

		a, b := webhookServer(t, store, rc, clk, nil), webhookServer(t, store, rc, clk, nil)
		var wg sync.WaitGroup
		for _, srv := range []*Server{a, b} {
			wg.Go(func() {
				for i := 2; i < 12; i++ {
					srv.webhook.tripped(ctx, fmt.Sprintf("cam-2-%d", i), failedRelease(i))
				}
				loop(srv, "cam-2")
			})
		}
		wg.Wait()
		a.Close()
		b.Close()
		posts, each := rc.total()
		assert.Equal(t, 2+11, posts, "two replicas post each event once")
		for k, v := range each {
			assert.Equal(t, 1, v, "posted twice: %s", k)
		}

		clk.add(25 * time.Hour)
		again := webhookServer(t, store, rc, clk, nil)
		again.webhook.tripped(ctx, "cam-1", failedRelease(1))
		loop(again, "cam-1")
		again.Close()
		posts, each = rc.total()
		assert.Equal(t, 2+11+1, posts)
		assert.Equal(t, 2, each[WebhookCrashLoop+" cam-1 "+string(api.RevisionRelease(rev1))], "a crash loop is told again a day later")
		assert.Equal(t, 1, each[WebhookBrakes+"  "+failedRelease(1).Release], "brakes trip once for a release")

		// Rows past webhookKeep are trimmed as the next event is posted.
		clk.add(webhookKeep + time.Hour)
		trim := webhookServer(t, store, rc, clk, nil)
		loop(trim, "cam-3")
		trim.Close()
		var rows int
		require.NoError(t, store.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM webhook_sent`).Scan(&rows))
		assert.Equal(t, 1, rows, "only cam-3's crash loop is left")
	})
}
