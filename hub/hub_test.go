package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/internal/testkit/promtext"
	"github.com/tend-dev/tend/internal/testkit/testpg"
)

// clock is a settable clock for the hub.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testHub is a hub over HTTP on a fresh database.
type testHub struct {
	t     *testing.T
	store *Store
	srv   *Server
	http  *httptest.Server
	clock *clock
}

const readToken = "read-secret-token"

func newTestHub(t *testing.T, dbURL string) *testHub {
	t.Helper()
	store, err := Open(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	c := &clock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	srv, err := NewServer(store, Options{ReadToken: readToken, Now: c.now})
	require.NoError(t, err)
	h := httptest.NewServer(srv)
	t.Cleanup(h.Close)
	return &testHub{t: t, store: store, srv: srv, http: h, clock: c}
}

func (h *testHub) token(device string) string {
	h.t.Helper()
	tok, err := h.store.CreateToken(context.Background(), device, h.clock.now())
	require.NoError(h.t, err)
	return tok
}

// post posts body with token and returns the status code and body.
func (h *testHub) post(token string, body []byte) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.http.URL+"/v1/reports", bytes.NewReader(body))
	require.NoError(h.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (h *testHub) report(token string, s api.Status) {
	h.t.Helper()
	b, err := json.Marshal(s)
	require.NoError(h.t, err)
	code, body := h.post(token, b)
	require.Equal(h.t, http.StatusOK, code, body)
}

// get reads path with the read token.
func (h *testHub) get(path string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.http.URL+path, nil)
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (h *testHub) getJSON(path string, v any) {
	h.t.Helper()
	code, body := h.get(path)
	require.Equal(h.t, http.StatusOK, code, body)
	require.NoError(h.t, json.Unmarshal([]byte(body), v), body)
}

func (h *testHub) metrics() map[string]float64 {
	return promtext.Scrape(h.t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = "/metrics"
		h.srv.ServeHTTP(w, r)
	}))
}

// stores runs fn against SQLite, and against a real PostgreSQL when one
// can run here (a fresh database on the package's shared server; -short
// skips it).
func stores(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, testpg.Database(t))
	})
}

const (
	rev1 = "main@sha1:1111111111111111111111111111111111111111"
	rev2 = "main@sha1:2222222222222222222222222222222222222222"
)

// doc is a status document of device at the hub's clock.
func (h *testHub) doc(device, applied, target string) api.Status {
	return api.Status{
		FormatVersion: api.FormatVersion, Device: device, AppliedRevision: applied, TargetRevision: target,
		LastReconcile: h.clock.now().Format(time.RFC3339Nano), Result: api.ResultNoop,
		Labels:    map[string]string{"site": "lyon"},
		Resources: []api.ResourceStatus{{ID: "file:/etc/a", State: api.ResourceOK}},
	}
}

func TestIngestRefusesBadReports(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		tokA, tokB := h.token("cam-a"), h.token("cam-b")
		good, _ := json.Marshal(h.doc("cam-a", rev1, ""))

		for _, c := range []struct {
			name  string
			token string
			body  []byte
			code  int
			want  string
		}{
			{"no token", "", good, http.StatusUnauthorized, "no device token"},
			{"unknown token", "tendd_nope", good, http.StatusUnauthorized, "unknown device token"},
			{"another device's report", tokB, good, http.StatusForbidden, `the token of device cam-b cannot report for device "cam-a"`},
			{"10 MB body", tokA, bytes.Repeat([]byte("x"), 10<<20), http.StatusRequestEntityTooLarge, "report of cam-a exceeds 1048576 bytes"},
			{"malformed JSON", tokA, []byte(`{"formatVersion": "1", "device": `), http.StatusBadRequest, "report of cam-a is not a status document"},
			{"trailing data", tokA, append(append([]byte{}, good...), []byte(` {}`)...), http.StatusBadRequest, "data after the status document"},
			{"unknown format", tokA, []byte(`{"formatVersion": "9", "device": "cam-a"}`), http.StatusBadRequest, `formatVersion "9"`},
			{"no lastReconcile", tokA, []byte(`{"formatVersion": "1", "device": "cam-a"}`), http.StatusBadRequest, `lastReconcile "" is not an RFC 3339 time`},
		} {
			t.Run(c.name, func(t *testing.T) {
				code, body := h.post(c.token, c.body)
				assert.Equal(t, c.code, code, body)
				assert.Contains(t, body, c.want)
			})
		}
		var l DeviceList
		h.getJSON("/v1/devices", &l)
		assert.Equal(t, 0, l.Total, "nothing stored")

		h.report(tokA, h.doc("cam-a", rev1, ""))
		old := h.doc("cam-a", rev1, "")
		h.clock.add(time.Minute)
		h.report(tokA, h.doc("cam-a", rev2, ""))
		h.report(tokA, old) // replayed: 200, ignored
		h.getJSON("/v1/devices", &l)
		require.Equal(t, 1, l.Total)
		assert.Equal(t, rev2, l.Devices[0].Applied, "the replayed report changed nothing")

		m := h.metrics()
		assert.Equal(t, 2.0, m[`tend_hub_reports_total{result="accepted"}`])
		assert.Equal(t, 1.0, m[`tend_hub_reports_total{result="replayed"}`])
		assert.Equal(t, 2.0, m[`tend_hub_reports_total{result="unauthorized"}`])
		assert.Equal(t, 1.0, m[`tend_hub_reports_total{result="forbidden"}`])
		assert.Equal(t, 1.0, m[`tend_hub_reports_total{result="too_large"}`])
		assert.Equal(t, 4.0, m[`tend_hub_reports_total{result="malformed"}`])
		assert.Equal(t, 1.0, m[`tend_hub_devices{state="applied"}`])
		assert.Equal(t, 0.0, m[`tend_hub_devices{state="failed"}`])
	})
}

func TestEventsAndReleases(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		canary, late := h.token("cam-1"), h.token("cam-2")
		h.report(canary, h.doc("cam-1", rev1, ""))
		h.report(late, h.doc("cam-2", rev1, ""))

		// rev2 appears: the canary stages then applies it; cam-2 is held in wave 1.
		h.clock.add(time.Minute)
		s := h.doc("cam-1", rev1, rev2)
		s.Staging = &api.Staging{Revision: rev2}
		h.report(canary, s)
		s2 := h.doc("cam-2", rev1, rev2)
		s2.Held, s2.Result = "held: rollout wave 1 opens 2026-12-03T13:00:00Z", api.ResultHeld
		h.report(late, s2)
		h.clock.add(90 * time.Second)
		h.report(canary, h.doc("cam-1", rev2, ""))

		var rd ReleaseDetail
		h.getJSON("/v1/releases/"+rev2, &rd)
		assert.Equal(t, 2, rd.Devices)
		assert.Equal(t, map[string]int{"applied": 1, "held": 1}, rd.Counts)
		require.Len(t, rd.Waves, 2)
		assert.Nil(t, rd.Waves[0].Wave)
		require.NotNil(t, rd.Waves[1].Wave)
		assert.Equal(t, 1, *rd.Waves[1].Wave)
		assert.Equal(t, map[string]int{"held": 1}, rd.Waves[1].Counts)
		require.Len(t, rd.DeviceParts, 2)
		assert.Equal(t, 90.0, rd.DeviceParts[0].AfterSeconds)

		// cam-2 fails it: rolled back and quarantined, then drift.
		h.clock.add(time.Hour)
		s2 = h.doc("cam-2", rev1, rev2)
		s2.Quarantined = []api.Quarantined{{Release: rev2, Revision: rev2, Reason: "service/web did not become healthy"}}
		s2.LastError = "rolled back: service/web did not become healthy"
		h.report(late, s2)
		h.clock.add(time.Minute)
		s2 = h.doc("cam-2", rev1, rev2)
		s2.Quarantined = []api.Quarantined{{Release: rev2, Revision: rev2, Reason: "service/web did not become healthy"}}
		s2.Resources = []api.ResourceStatus{{ID: "file:/etc/a", State: api.ResourceDrifted, Message: "content changed"}}
		h.report(late, s2)

		var dd DeviceDetail
		h.getJSON("/v1/devices/cam-2", &dd)
		assert.Equal(t, StateFailed, dd.Device.State)
		var kinds []string
		for _, e := range dd.Events {
			kinds = append(kinds, e.Kind+" "+e.Detail)
		}
		assert.Equal(t, []string{
			"drift file:/etc/a: content changed",
			"error rolled back: service/web did not become healthy",
			"failed rolled back: service/web did not become healthy",
			"held held: rollout wave 1 opens 2026-12-03T13:00:00Z (wave 1)",
			"first seen ",
		}, kinds)
		h.getJSON("/v1/devices/cam-1", &dd)
		kinds = nil
		for _, e := range dd.Events {
			kinds = append(kinds, e.Kind+" "+e.Revision)
		}
		assert.Equal(t, []string{"applied " + rev2, "staging " + rev2, "first seen " + rev1}, kinds)

		rd = ReleaseDetail{}
		h.getJSON("/v1/releases/"+rev2, &rd)
		assert.Equal(t, map[string]int{"applied": 1, "failed": 1}, rd.Counts)
		var rl ReleaseList
		h.getJSON("/v1/releases", &rl)
		require.Len(t, rl.Releases, 2)
		assert.Equal(t, rev2, rl.Releases[0].Revision, "newest first")
		assert.Equal(t, "commit:"+rev2[len("main@sha1:"):], rl.Releases[0].Key)

		m := h.metrics()
		assert.Equal(t, 1.0, m[`tend_hub_release_devices{release="commit:`+rev2[len("main@sha1:"):]+`",state="failed"}`])
		assert.Equal(t, 1.0, m[`tend_hub_release_devices{release="commit:`+rev2[len("main@sha1:"):]+`",state="applied"}`])
		assert.Equal(t, 1.0, m[`tend_hub_release_convergence_seconds_count`], "cam-1 converged; first reports are not convergences")
		assert.Equal(t, 90.0, m[`tend_hub_release_convergence_seconds_sum`])
		assert.Equal(t, 1.0, m[`tend_hub_devices{state="failed"}`])

		// A third device on the ref that has not reported rev2 yet.
		h.report(h.token("cam-3"), h.doc("cam-3", rev1, ""))
		rd = ReleaseDetail{}
		h.getJSON("/v1/releases/"+rev2, &rd)
		assert.Equal(t, map[string]int{"applied": 1, "failed": 1, StateUnreported: 1}, rd.Counts)
		assert.Equal(t, 3, rd.Devices)

		code, _ := h.get("/v1/devices/nobody")
		assert.Equal(t, http.StatusNotFound, code)
		code, _ = h.get("/v1/releases/main@sha1:0000")
		assert.Equal(t, http.StatusNotFound, code)
	})
}

func TestDeviceListSelectsSortsAndPages(t *testing.T) {
	h := newTestHub(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	for i := range 7 {
		name := fmt.Sprintf("cam-%d", i)
		s := h.doc(name, rev1, "")
		s.Labels = map[string]string{"site": []string{"lyon", "oslo"}[i%2]}
		if i == 3 {
			s.LastError = "boom"
		}
		h.report(h.token(name), s)
	}
	var l DeviceList
	h.getJSON("/v1/devices?selector=site=oslo", &l)
	assert.Equal(t, 3, l.Total)
	h.getJSON("/v1/devices?selector=site!=oslo&sort=name&order=desc&limit=2&offset=1", &l)
	assert.Equal(t, 4, l.Total)
	require.Len(t, l.Devices, 2)
	assert.Equal(t, []string{"cam-4", "cam-2"}, []string{l.Devices[0].Name, l.Devices[1].Name})
	h.getJSON("/v1/devices?sort=state", &l)
	assert.Equal(t, "cam-3", l.Devices[0].Name, "worst state first")
	assert.Equal(t, 1, l.Counts[StateError])

	for _, bad := range []struct{ q, want string }{
		{"selector==x", `selector term "=x" names no label`},
		{"sort=colour", `sort="colour": sort by name`},
		{"limit=-1", `limit="-1": use a whole number from 0 to 1000`},
	} {
		code, body := h.get("/v1/devices?" + bad.q)
		assert.Equal(t, http.StatusBadRequest, code, bad.q)
		assert.Contains(t, body, bad.want)
	}
}

func TestReadNeedsTheReadToken(t *testing.T) {
	h := newTestHub(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	for _, path := range []string{"/", "/v1/devices", "/v1/releases", "/devices/x", "/releases/x"} {
		resp, err := http.Get(h.http.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
		assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Basic")
	}
	req, _ := http.NewRequest(http.MethodGet, h.http.URL+"/v1/devices", nil)
	req.SetBasicAuth("anyone", readToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "basic auth, as browsers send it")
	for _, path := range []string{"/healthz", "/metrics"} {
		resp, err := http.Get(h.http.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	_, err = NewServer(h.store, Options{})
	assert.ErrorContains(t, err, "give --read-token-file FILE, or --public-read")
}

func TestPagesRenderHostileValuesAsText(t *testing.T) {
	h := newTestHub(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	// No token can be made for such a name; stored directly, it still
	// renders as text.
	hostile := `<script>alert(1)</script>`
	s := h.doc(hostile, rev1, rev2)
	s.Labels = map[string]string{"site": `"><img src=x onerror=alert(2)>`}
	s.Held = `held: <b>wave 1</b>`
	_, err := h.store.Ingest(context.Background(), &s, h.clock.now())
	require.NoError(t, err)
	h.report(h.token("cam-ok"), h.doc("cam-ok", rev1, ""))

	code, page := h.get("/")
	require.Equal(t, http.StatusOK, code)
	assert.NotContains(t, page, "<script>alert")
	assert.NotContains(t, page, "<img src=x")
	assert.NotContains(t, page, "<b>wave")
	assert.Contains(t, page, "&lt;script&gt;alert(1)&lt;/script&gt;")
	assert.Contains(t, page, `&#34;&gt;&lt;img src=x onerror=alert(2)&gt;`)
	assert.Contains(t, page, `<a href="/devices/cam-ok">cam-ok</a>`)

	code, page = h.get("/?selector=site=lyon")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, page, "cam-ok")
	assert.NotContains(t, page, "alert(1)")

	code, page = h.get("/devices/" + url.PathEscape(hostile))
	require.Equal(t, http.StatusOK, code, page)
	assert.NotContains(t, page, "<script>alert")
	assert.Contains(t, page, `<h1 id="name">&lt;script&gt;alert(1)&lt;/script&gt;</h1>`)

	code, page = h.get("/releases/" + rev1)
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, `<svg id="convergence"`)
	assert.Contains(t, page, `<polyline class="wave"`)

	code, page = h.get("/?selector=(")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, page, `names no label`)
}

func TestMigrations(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "hub.db")
	for range 2 { // a second start finds the schema up to date
		s, err := Open(context.Background(), db)
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	s, err := Open(context.Background(), db)
	require.NoError(t, err)
	_, err = s.db.Exec(`UPDATE schema_version SET version = 99`)
	require.NoError(t, err)
	s.Close()
	_, err = Open(context.Background(), db)
	assert.ErrorContains(t, err, "schema version 99 is newer than this tend knows ("+strconv.Itoa(len(migrations))+")")

	for _, bad := range []struct{ url, want string }{
		{"sqlite://relative.db", "name an absolute file path"},
		{"mysql://x", `unknown scheme "mysql"`},
		{"hub.db", "is not a database URL"},
	} {
		_, err := Open(context.Background(), bad.url)
		assert.ErrorContains(t, err, bad.want, bad.url)
	}
}
