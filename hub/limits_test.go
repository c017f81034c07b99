package hub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/promtext"
)

// gate holds the reports of the devices it is told to, once admitted,
// until it opens.
type gate struct {
	hold    func(device string) bool
	entered chan string
	open    chan struct{}
	once    sync.Once
}

// release lets the held reports go on.
func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

func newGate(hold func(string) bool) *gate {
	return &gate{hold: hold, entered: make(chan string, 100), open: make(chan struct{})}
}

func (g *gate) wait(device string) {
	if g.hold(device) {
		g.entered <- device
		<-g.open
	}
}

// boundedHub is a hub with opts over HTTP, its reports held by a gate.
func boundedHub(t *testing.T, opts Options, g *gate) (*testHub, *Server, string) {
	t.Helper()
	h := newTestHub(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	opts.ReadToken, opts.Now = readToken, h.clock.now
	srv, err := NewServer(h.store, opts)
	require.NoError(t, err)
	srv.reportGate = g.wait
	web := httptest.NewServer(srv)
	t.Cleanup(func() { web.Close(); srv.Close() })
	t.Cleanup(g.release) // first: a test that failed holding reports
	return h, srv, web.URL
}

// postReport posts body for token to url; chunked hides its length.
func postReport(t *testing.T, url, token string, body []byte, chunked bool) *http.Response {
	t.Helper()
	var r io.Reader = bytes.NewReader(body)
	if chunked {
		r = struct{ io.Reader }{r}
	}
	req, err := http.NewRequest(http.MethodPost, url+"/v1/reports", r)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// padded is device's status document padded with spaces to size bytes.
func padded(t *testing.T, h *testHub, device string, size int) []byte {
	b, err := json.Marshal(h.doc(device, rev1, ""))
	require.NoError(t, err)
	require.Less(t, len(b), size)
	return append(b, bytes.Repeat([]byte(" "), size-len(b))...)
}

// scrape reads srv's metrics.
func scrape(t *testing.T, srv *Server) map[string]float64 {
	return promtext.Scrape(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = "/metrics"
		srv.ServeHTTP(w, r)
	}))
}

func requireBusy(t *testing.T, resp *http.Response) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	after, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", resp.Header.Get("Retry-After"))
	assert.GreaterOrEqual(t, after, 5)
	assert.LessOrEqual(t, after, 15)
}

// Reports beyond MaxReports handled at once are turned away 503 with a
// Retry-After, and counted busy; those held then finish.
func TestReportsBeyondMaxReportsAreBusy(t *testing.T) {
	g := newGate(func(d string) bool { return strings.HasPrefix(d, "held-") })
	h, srv, url := boundedHub(t, Options{MaxReports: 3}, g)
	var wg sync.WaitGroup
	codes := make([]int, 3)
	for i := range 3 {
		name := fmt.Sprintf("held-%d", i)
		tok, body := h.token(name), padded(t, h, name, 1000)
		wg.Go(func() { codes[i] = postReport(t, url, tok, body, false).StatusCode })
	}
	for range 3 {
		<-g.entered
	}
	requireBusy(t, postReport(t, url, h.token("cam-4"), padded(t, h, "cam-4", 1000), false))
	assert.Equal(t, 1.0, scrape(t, srv)[`tend_hub_reports_total{result="busy"}`])
	g.release()
	wg.Wait()
	assert.Equal(t, []int{200, 200, 200}, codes)
	code := postReport(t, url, h.token("cam-5"), padded(t, h, "cam-5", 1000), false).StatusCode
	assert.Equal(t, http.StatusOK, code, "a slot is free again")
	m := scrape(t, srv)
	assert.Equal(t, 4.0, m[`tend_hub_reports_total{result="accepted"}`])
	assert.Equal(t, 1.0, m[`tend_hub_reports_total{result="busy"}`])
}

// A report reserves its Content-Length (1 MiB without one) of
// MaxInflightBytes before its body is read; one that does not fit is
// turned away 503.
func TestReportsBeyondMaxInflightBytesAreBusy(t *testing.T) {
	g := newGate(func(d string) bool { return strings.HasPrefix(d, "big-") })
	h, srv, url := boundedHub(t, Options{MaxInflightBytes: 2*MaxReportBytes + MaxReportBytes/2}, g)
	var wg sync.WaitGroup
	for i := range 2 {
		name := fmt.Sprintf("big-%d", i)
		tok, body := h.token(name), padded(t, h, name, MaxReportBytes-1000)
		wg.Go(func() { assert.Equal(t, http.StatusOK, postReport(t, url, tok, body, false).StatusCode) })
	}
	for range 2 {
		<-g.entered
	}
	// Half a MiB and 2,000 bytes are left.
	tok := h.token("cam-small")
	requireBusy(t, postReport(t, url, tok, padded(t, h, "cam-small", MaxReportBytes/2+2001), false))
	assert.Equal(t, http.StatusOK, postReport(t, url, tok, padded(t, h, "cam-small", 100_000), false).StatusCode)
	requireBusy(t, postReport(t, url, tok, padded(t, h, "cam-small", 1000), true)) // no length: 1 MiB
	g.release()
	wg.Wait()
	assert.Equal(t, http.StatusOK, postReport(t, url, tok, padded(t, h, "cam-small", 1000), true).StatusCode, "the budget is back")
	m := scrape(t, srv)
	assert.Equal(t, 2.0, m[`tend_hub_reports_total{result="busy"}`])
	assert.Equal(t, 4.0, m[`tend_hub_reports_total{result="accepted"}`])
}

// lineCounter counts the log lines written through it, by message.
type lineCounter struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for line := range bytes.Lines(p) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			return 0, err
		}
		c.lines = append(c.lines, m)
	}
	return len(p), nil
}

// count is the lines of msg, and of them the summaries' suppressed.
func (c *lineCounter) count(msg string) (lines, summaries int, suppressed float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if l["msg"] != msg {
			continue
		}
		lines++
		if n, ok := l["suppressed"].(float64); ok {
			summaries++
			suppressed += n
		}
	}
	return lines, summaries, suppressed
}

// 10,000 requests without a token, reports and reads from 50 addresses,
// write 10 lines of each a minute and a summary of the rest; every one is
// counted in the metrics.
func TestRefusalLogsAreBounded(t *testing.T) {
	h := newTestHub(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	logs := &lineCounter{}
	srv, err := NewServer(h.store, Options{ReadToken: readToken, Now: h.clock.now, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	require.NoError(t, err)
	const n = 10_000
	for i := range n {
		var r *http.Request
		if i%2 == 0 {
			r = httptest.NewRequest(http.MethodPost, "/v1/reports", strings.NewReader("{}"))
		} else {
			r = httptest.NewRequest(http.MethodGet, "/v1/devices", nil)
		}
		r.RemoteAddr = fmt.Sprintf("192.0.2.%d:%d", i%50, 1024+i)
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		require.Equal(t, http.StatusUnauthorized, w.Code)
	}
	for _, msg := range []string{msgReportRefused, msgReadRefused} {
		lines, summaries, _ := logs.count(msg)
		assert.Equal(t, logKeysPerWindow, lines, "%s: the first of 10 addresses (25 tried) in the minute", msg)
		assert.Zero(t, summaries, msg)
	}

	// A minute on, the next refusal tells how many were held back.
	h.clock.add(logWindow)
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/reports", nil))
	lines, summaries, suppressed := logs.count(msgReportRefused)
	assert.Equal(t, logKeysPerWindow+2, lines, "a summary, and the new window's first")
	assert.Equal(t, 1, summaries)
	assert.Equal(t, float64(n/2-logKeysPerWindow), suppressed)
	// Closing tells the rest.
	srv.Close()
	lines, summaries, suppressed = logs.count(msgReadRefused)
	assert.Equal(t, logKeysPerWindow+1, lines)
	assert.Equal(t, 1, summaries)
	assert.Equal(t, float64(n/2-logKeysPerWindow), suppressed)

	m := scrape(t, srv)
	assert.Equal(t, float64(n/2+1), m[`tend_hub_reports_total{result="unauthorized"}`])
	assert.Equal(t, float64(n/2), m[`tend_hub_reads_refused_total{reason="unauthorized"}`])
	assert.Equal(t, float64(n/2-logKeysPerWindow), m[`tend_hub_log_suppressed_total{message="report refused"}`])
	assert.Equal(t, float64(n/2-logKeysPerWindow), m[`tend_hub_log_suppressed_total{message="read refused"}`])
}

// With the database gone, every request with a device's token fails a
// read: 1,000 of them write one "read failed" line, not 1,000.
func TestReadFailuresLogBounded(t *testing.T) {
	h := newTestHub(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	logs := &lineCounter{}
	srv, err := NewServer(h.store, Options{ReadToken: readToken, Now: h.clock.now, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	require.NoError(t, err)
	require.NoError(t, h.store.db.Close())
	for range 1000 {
		r := httptest.NewRequest(http.MethodGet, "/v1/verdict?release=commit:ab12&before=1", nil)
		r.Header.Set("Authorization", "Bearer "+tokenPrefix+"made-up")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		require.Equal(t, http.StatusServiceUnavailable, w.Code)
	}
	lines, _, _ := logs.count(msgReadFailed)
	assert.Equal(t, 1, lines)
	srv.Close()
	_, summaries, suppressed := logs.count(msgReadFailed)
	assert.Equal(t, 1, summaries)
	assert.Equal(t, 999.0, suppressed)
}
