package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
)

func intp(n int) *int { return &n }

func TestJudge(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	applied := func(ago time.Duration) brakePart {
		return brakePart{state: StateApplied, applied: now.Add(-ago).UnixNano(), runs: true, healthy: true}
	}
	failed := brakePart{state: StateFailed}
	tests := []struct {
		name   string
		before int
		parts  []brakePart
		th     api.Thresholds
		want   BrakesVerdict
	}{
		{"no thresholds: one failure stops", 1, []brakePart{applied(time.Hour), failed}, api.Thresholds{},
			BrakesVerdict{Devices: 2, Failed: 1, Applied: 1, Soaked: 1, Tripped: true, Reason: "1 of 2 wave-0 devices failed main@sha1:111111111111… (maxFailed 0)"}},
		{"failures within maxFailed go", 1, []brakePart{failed, applied(0)}, api.Thresholds{MaxFailed: intp(1)},
			BrakesVerdict{Devices: 2, Failed: 1, Applied: 1, Soaked: 1, Go: true}},
		{"the issue's example", 1, []brakePart{failed, failed, applied(0), applied(0), applied(0)}, api.Thresholds{MaxFailed: intp(1)},
			BrakesVerdict{Devices: 5, Failed: 2, Applied: 3, Soaked: 3, Tripped: true, Reason: "2 of 5 wave-0 devices failed main@sha1:111111111111… (maxFailed 1)"}},
		{"percent over", 2, []brakePart{failed, applied(0), applied(0), applied(0)}, api.Thresholds{MaxFailedPercent: intp(20)},
			BrakesVerdict{Devices: 4, Failed: 1, Applied: 3, Soaked: 3, Tripped: true, Reason: "1 of 4 devices in waves 0-1 failed main@sha1:111111111111… (maxFailedPercent 20)"}},
		{"percent at the limit goes", 1, []brakePart{failed, applied(0), applied(0), applied(0)}, api.Thresholds{MaxFailedPercent: intp(25)},
			BrakesVerdict{Devices: 4, Failed: 1, Applied: 3, Soaked: 3, Go: true}},
		{"a crash loop running it is a failure", 1, []brakePart{{state: StateApplied, runs: true, loops: true}}, api.Thresholds{},
			BrakesVerdict{Devices: 1, Failed: 1, Tripped: true, Reason: "1 of 1 wave-0 devices failed main@sha1:111111111111… (maxFailed 0)"}},
		{"superseded parts do not count", 1, []brakePart{{state: StateSuperseded}, applied(0)}, api.Thresholds{},
			BrakesVerdict{Devices: 1, Applied: 1, Soaked: 1, Go: true}},
		{"not soaked yet", 1, []brakePart{applied(9 * time.Minute)}, api.Thresholds{MinApplied: 1, Soak: 10 * time.Minute},
			BrakesVerdict{Devices: 1, Applied: 1, Reason: "0 of 1 wave-0 devices ran main@sha1:111111111111… healthy for 10m0s (minApplied 1)"}},
		{"soaked", 1, []brakePart{applied(10 * time.Minute)}, api.Thresholds{MinApplied: 1, Soak: 10 * time.Minute},
			BrakesVerdict{Devices: 1, Applied: 1, Soaked: 1, Go: true}},
		{"applied but unhealthy is not soaked", 1, []brakePart{{state: StateApplied, applied: now.Add(-time.Hour).UnixNano(), runs: true}}, api.Thresholds{MinApplied: 1, Soak: time.Minute},
			BrakesVerdict{Devices: 1, Applied: 1, Reason: "0 of 1 wave-0 devices ran main@sha1:111111111111… healthy for 1m0s (minApplied 1)"}},
		{"too few applied", 1, []brakePart{applied(0), {state: StateHeld}}, api.Thresholds{MinApplied: 2},
			BrakesVerdict{Devices: 2, Applied: 1, Soaked: 1, Reason: "1 of 2 wave-0 devices applied main@sha1:111111111111… (minApplied 2)"}},
		{"no earlier device and no minApplied goes", 1, nil, api.Thresholds{}, BrakesVerdict{Go: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := judge(api.RevisionRelease(rev1), rev1, tt.before, tt.parts, tt.th, now)
			tt.want.Release, tt.want.Revision, tt.want.Before = "commit:1111111111111111111111111111111111111111", rev1, tt.before
			require.Equal(t, tt.want, got)
		})
	}
}

// hook is a webhook receiver.
type hook struct {
	mu     sync.Mutex
	events []WebhookEvent
	got    chan struct{}
}

func newHook(t *testing.T) (*hook, string) {
	h := &hook{got: make(chan struct{}, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e WebhookEvent
		b, _ := io.ReadAll(r.Body)
		require.NoError(t, json.Unmarshal(b, &e))
		h.mu.Lock()
		h.events = append(h.events, e)
		h.mu.Unlock()
		h.got <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func (h *hook) wait(t *testing.T) WebhookEvent {
	t.Helper()
	select {
	case <-h.got:
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook event")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.events[len(h.events)-1]
}

// A device of a later wave asks the hub with its report token; the hub
// counts the earlier waves' reports, tells of the trip once on the
// webhook, and of a crash loop.
func TestVerdictOverHTTP(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		events, hookURL := newHook(t)
		srv, err := NewServer(h.store, Options{ReadToken: readToken, Now: h.clock.now, Webhook: hookURL})
		require.NoError(t, err)
		web := httptest.NewServer(srv)
		t.Cleanup(func() { web.Close(); srv.Close() })

		wave := func(n int) *int { return &n }
		canary, later := h.token("cam-1"), h.token("cam-9")
		report := func(tok string, s api.Status) {
			b, _ := json.Marshal(s)
			req, _ := http.NewRequest(http.MethodPost, web.URL+"/v1/reports", bytesReader(b))
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
		}
		verdict := func(tok string, th api.Thresholds) (int, BrakesVerdict) {
			req, _ := http.NewRequest(http.MethodGet, web.URL+"/v1/verdict?"+api.VerdictQuery{Revision: rev2, Before: 1, Thresholds: th}.Encode(), nil)
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			var v BrakesVerdict
			if resp.StatusCode == http.StatusOK {
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
			}
			return resp.StatusCode, v
		}
		code, _ := verdict("", api.Thresholds{})
		require.Equal(t, http.StatusUnauthorized, code, "a verdict needs the read token or a device token")
		code, _ = verdict("tendd_unknown", api.Thresholds{})
		require.Equal(t, http.StatusUnauthorized, code)

		// the canary applies rev2: go once it soaked 10m
		s := h.doc("cam-1", rev1, rev1)
		s.Wave = wave(0)
		report(canary, s)
		h.clock.add(time.Minute)
		s = h.doc("cam-1", rev2, rev2)
		s.Wave = wave(0)
		report(canary, s)
		soak := api.Thresholds{MinApplied: 1, Soak: 10 * time.Minute}
		code, v := verdict(later, soak)
		require.Equal(t, http.StatusOK, code)
		require.False(t, v.Go)
		require.Equal(t, "0 of 1 wave-0 devices ran main@sha1:222222222222… healthy for 10m0s (minApplied 1)", v.Reason)
		h.clock.add(10 * time.Minute)
		_, v = verdict(later, soak)
		require.True(t, v.Go, v.Reason)
		_, v = verdict(readToken, soak)
		require.True(t, v.Go, "the read token reads verdicts too")

		// its service crash-loops: a failure of rev2, told on the webhook
		s = h.doc("cam-1", rev2, rev2)
		s.Wave = wave(0)
		s.Services = []api.ServiceStatus{{ID: "service:web", Replicas: []api.ReplicaStatus{{State: api.ReplicaRestarting, CrashLoop: true}}}}
		report(canary, s)
		e := events.wait(t)
		require.Equal(t, WebhookCrashLoop, e.Kind)
		require.Equal(t, "tend: device cam-1 is crash-looping service:web at "+rev2, e.Text)
		_, v = verdict(later, soak)
		require.True(t, v.Tripped)
		require.Equal(t, "1 of 1 wave-0 devices failed main@sha1:222222222222… (maxFailed 0)", v.Reason)
		e = events.wait(t)
		require.Equal(t, WebhookBrakes, e.Kind)
		require.Equal(t, rev2, e.Revision)
		require.Contains(t, e.Text, "brakes tripped for release "+rev2+": 1 of 1 wave-0 devices failed")
		_, v = verdict(later, soak) // asked again: told once
		require.True(t, v.Tripped)
		srv.Close()
		events.mu.Lock()
		require.Len(t, events.events, 2)
		events.mu.Unlock()
	})
}

func TestWebhookURLMustBeHTTP(t *testing.T) {
	store, err := Open(context.Background(), "sqlite://"+t.TempDir()+"/hub.db")
	require.NoError(t, err)
	defer store.Close()
	_, err = NewServer(store, Options{PublicRead: true, Webhook: "hooks.example/x"})
	require.EqualError(t, err, `--webhook "hooks.example/x" is not an http(s) URL: use e.g. https://hooks.slack.com/services/…`)
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// A webhook's path is its secret (Slack's): what fails to reach it, or
// what it answers, is said with its scheme and host alone.
func TestWebhookErrorsKeepItsPathSecret(t *testing.T) {
	answer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	t.Cleanup(answer.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	for _, base := range []string{answer.URL, downURL} {
		w := newWebhook(base+"/services/T000/B000/s3cr3t", nil, slog.New(slog.DiscardHandler), time.Now, newBoundMetrics(prometheus.NewRegistry()))
		err := w.post([]byte(`{"text":"x"}`))
		w.close()
		require.Error(t, err)
		require.NotContains(t, err.Error(), "s3cr3t")
		require.Contains(t, err.Error(), "the webhook at "+base)
	}
}
