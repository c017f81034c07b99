package status

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/internal/testkit/testfs"
	"github.com/tend-dev/tend/manifest"
)

// reportCollector is a collector over real HTTP. Its answer to the nth post
// (from 0) is answer(n, w); nil accepts every post.
type reportCollector struct {
	*httptest.Server
	answer func(n int, w http.ResponseWriter)

	mu    sync.Mutex
	posts []reportPost
}

type reportPost struct {
	at     time.Time
	header http.Header
	body   []byte
}

func newReportCollector(t *testing.T, answer func(n int, w http.ResponseWriter)) *reportCollector {
	c := &reportCollector{answer: answer}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		c.mu.Lock()
		n := len(c.posts)
		c.posts = append(c.posts, reportPost{at: time.Now(), header: req.Header.Clone(), body: body})
		c.mu.Unlock()
		if req.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if c.answer != nil {
			c.answer(n, w)
		}
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *reportCollector) received() []reportPost {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]reportPost(nil), c.posts...)
}

// dropReportConnection closes the connection without answering.
func dropReportConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

// reportLog captures what the reporter logs, at debug.
type reportLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *reportLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *reportLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// newTestReporter returns a Reporter without jitter and with short retry
// waits, logging at debug to the returned reportLog.
func newTestReporter(t *testing.T, cfg manifest.Report, stateDir string) (*Reporter, *reportLog) {
	t.Helper()
	logs := &reportLog{}
	r, err := NewReporter(cfg, stateDir, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	require.NoError(t, err)
	r.jitter = func(time.Duration) time.Duration { return 0 }
	r.client.RetryWaitMin, r.client.RetryWaitMax = 10*time.Millisecond, 50*time.Millisecond
	return r, logs
}

// reportStatus is a status a test can change while the reporter runs.
type reportStatus struct {
	mu sync.Mutex
	s  Status
}

func newReportStatus(revision string) *reportStatus {
	return &reportStatus{s: Status{
		FormatVersion: FormatVersion, Device: "cam-017", Version: "1.2.3",
		AppliedRevision: revision, LastReconcile: time.Now().UTC().Format(time.RFC3339),
		Result: ResultNoop, Resources: []ResourceStatus{{ID: "file:/etc/infer/a", State: StateOK}}, Drift: []DriftRecord{},
	}}
}

func (s *reportStatus) get() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s
}

func (s *reportStatus) set(revision string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.s.AppliedRevision = revision
	s.s.LastReconcile = time.Now().UTC().Format(time.RFC3339Nano) // not part of the fingerprint
}

// runReporter runs r until the test ends; the returned channel signals a
// change of status.
func runReporter(t *testing.T, r *Reporter, status *reportStatus) chan<- struct{} {
	changed := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, status.get, changed)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return changed
}

func notifyReporter(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func decodeReported(t *testing.T, b []byte) Status {
	t.Helper()
	var s Status
	require.NoError(t, json.Unmarshal(b, &s), "%s", b)
	return s
}

func TestReporterRetriesUntilAccepted(t *testing.T) {
	t.Parallel()
	c := newReportCollector(t, func(n int, w http.ResponseWriter) {
		switch n {
		case 0:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 1:
			dropReportConnection(w)
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	u := strings.Replace(c.URL, "http://", "http://reporter:url-pass-9f2@", 1)
	r, logs := newTestReporter(t, manifest.Report{URL: u, Interval: manifest.Duration(time.Hour), Headers: map[string]string{
		"X-Api-Key": "hdr-secret-7c1", "X-Fleet": "lab-west",
	}}, t.TempDir())
	status := newReportStatus("main@sha1:aaaa")
	idle := waits(r)
	runReporter(t, r, status)

	require.Eventually(t, func() bool { return r.Sent() == 1 }, 20*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return idle() >= 1 }, 20*time.Second, 5*time.Millisecond, "the reporter waits: nothing more is posted")
	posts := c.received()
	require.Len(t, posts, 4, "three failures, then one accepted post")
	assert.Equal(t, 1, r.Sent())

	got := posts[3]
	sent := decodeReported(t, got.body)
	require.NotNil(t, sent.ReportSeq, "a posted report carries its reportSeq")
	assert.Equal(t, uint64(1), sent.ReportSeq.Seq)
	sent.ReportSeq = nil
	assert.Equal(t, status.get(), sent)
	assert.Equal(t, "application/json", got.header.Get("Content-Type"))
	assert.Equal(t, "tend/1.2.3", got.header.Get("User-Agent"))
	assert.Equal(t, "hdr-secret-7c1", got.header.Get("X-Api-Key"))
	assert.Equal(t, "lab-west", got.header.Get("X-Fleet"))
	user, pass, ok := (&http.Request{Header: got.header}).BasicAuth()
	assert.True(t, ok && user == "reporter" && pass == "url-pass-9f2", "URL credentials are sent as basic auth")
	for _, p := range posts {
		assert.Equal(t, posts[3].body, p.body, "every attempt posts the same document")
	}

	out := logs.String()
	assert.Contains(t, out, "retrying request", "retryablehttp logs through slog at debug")
	for _, secret := range []string{"hdr-secret-7c1", "lab-west", "url-pass-9f2", "reporter:"} {
		assert.NotContains(t, out, secret)
	}
}

func TestReporterHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	c := newReportCollector(t, func(n int, w http.ResponseWriter) {
		if n == 0 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	r, _ := newTestReporter(t, manifest.Report{URL: c.URL}, t.TempDir())
	runReporter(t, r, newReportStatus("main@sha1:aaaa"))

	require.Eventually(t, func() bool { return r.Sent() == 1 }, 20*time.Second, 5*time.Millisecond)
	posts := c.received()
	require.Len(t, posts, 2)
	assert.GreaterOrEqual(t, posts[1].at.Sub(posts[0].at), time.Second, "the retry waits Retry-After, not RetryWaitMin (10ms)")
}

func TestReporterSkipsUnchangedStatus(t *testing.T) {
	t.Parallel()
	c := newReportCollector(t, nil)
	r, _ := newTestReporter(t, manifest.Report{URL: c.URL, Interval: manifest.Duration(time.Hour)}, t.TempDir())
	status := newReportStatus("main@sha1:aaaa")
	idle := waits(r)
	changed := runReporter(t, r, status)
	require.Eventually(t, func() bool { return r.Sent() == 1 }, 20*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return idle() >= 1 }, 20*time.Second, 5*time.Millisecond)

	for range 3 {
		before := idle()
		status.set("main@sha1:aaaa") // a new tick, the same content
		notifyReporter(changed)
		// The reporter wakes, finds the same content, and waits again.
		require.Eventually(t, func() bool { return idle() > before }, 20*time.Second, 5*time.Millisecond)
	}
	assert.Len(t, c.received(), 1, "an unchanged status is not resent before the interval")
}

func TestReporterSendsChangedStatusAtOnce(t *testing.T) {
	t.Parallel()
	c := newReportCollector(t, nil)
	r, _ := newTestReporter(t, manifest.Report{URL: c.URL, Interval: manifest.Duration(time.Hour)}, t.TempDir())
	status := newReportStatus("main@sha1:aaaa")
	changed := runReporter(t, r, status)
	require.Eventually(t, func() bool { return r.Sent() == 1 }, 20*time.Second, 5*time.Millisecond)

	status.set("main@sha1:bbbb")
	notifyReporter(changed)
	require.Eventually(t, func() bool { return r.Sent() == 2 }, 20*time.Second, 5*time.Millisecond)
	posts := c.received()
	require.Len(t, posts, 2)
	assert.Equal(t, "main@sha1:bbbb", decodeReported(t, posts[1].body).AppliedRevision)
}

func TestReporterResendsEveryInterval(t *testing.T) {
	t.Parallel()
	const interval = 300 * time.Millisecond
	c := newReportCollector(t, nil)
	r, _ := newTestReporter(t, manifest.Report{URL: c.URL, Interval: manifest.Duration(interval)}, t.TempDir())
	runReporter(t, r, newReportStatus("main@sha1:aaaa"))

	require.Eventually(t, func() bool { return r.Sent() >= 3 }, 20*time.Second, 5*time.Millisecond)
	posts := c.received()
	first := decodeReported(t, posts[0].body)
	for i := 1; i < len(posts); i++ {
		assert.GreaterOrEqual(t, posts[i].at.Sub(posts[i-1].at), interval-10*time.Millisecond, "post %d", i)
		got := decodeReported(t, posts[i].body)
		assert.Equal(t, ReportSeq{Epoch: first.ReportSeq.Epoch, Seq: first.ReportSeq.Seq + uint64(i)}, *got.ReportSeq, "post %d is numbered after the one before", i)
		got.ReportSeq = first.ReportSeq
		assert.Equal(t, first, got, "post %d resends the same status", i)
	}
}

func TestReporterCacheSurvivesRestart(t *testing.T) {
	t.Parallel()
	c := newReportCollector(t, nil)
	dir := t.TempDir()
	cfg := manifest.Report{URL: c.URL, Interval: manifest.Duration(time.Hour)}
	status := newReportStatus("main@sha1:aaaa")

	// run starts a reporter on dir with the clock offset by skew and stops
	// it once it has posted want times and settled into a wait.
	run := func(t *testing.T, skew time.Duration, want int) int {
		r, _ := newTestReporter(t, cfg, dir)
		r.now = func() time.Time { return time.Now().Add(skew) }
		idle := waits(r)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Run(ctx, status.get, nil)
		}()
		assert.Eventually(t, func() bool { return r.Sent() == want && idle() >= 1 }, 20*time.Second, 5*time.Millisecond)
		cancel()
		<-done
		return r.Sent()
	}

	before := time.Now()
	require.Equal(t, 1, run(t, 0, 1))
	after := time.Now()
	b, err := os.ReadFile(statedir.Dir(dir).Report())
	require.NoError(t, err)
	var cache struct {
		Fingerprint string    `json:"fingerprint"`
		AcceptedAt  time.Time `json:"acceptedAt"`
	}
	require.NoError(t, json.Unmarshal(b, &cache))
	assert.Equal(t, status.get().Fingerprint(), cache.Fingerprint)
	assert.False(t, cache.AcceptedAt.Before(before.Truncate(time.Second)) || cache.AcceptedAt.After(after), "accepted while the reporter ran")
	assert.Empty(t, testfs.TempFiles(t, dir), "no temp file left")

	t.Run("unchanged status is not resent after a restart", func(t *testing.T) {
		assert.Equal(t, 0, run(t, 0, 0))
		assert.Len(t, c.received(), 1)
	})
	t.Run("unchanged status is resent once the interval has passed since acceptedAt", func(t *testing.T) {
		assert.Equal(t, 1, run(t, 2*time.Hour, 1))
		assert.Len(t, c.received(), 2)
	})
	t.Run("changed status is sent after a restart", func(t *testing.T) {
		status.set("main@sha1:bbbb")
		assert.Equal(t, 1, run(t, 0, 1))
		posts := c.received()
		require.Len(t, posts, 3)
		assert.Equal(t, "main@sha1:bbbb", decodeReported(t, posts[2].body).AppliedRevision)
	})
}

func TestReporterDoesNotRetryClientErrors(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusNotFound} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			t.Parallel()
			c := newReportCollector(t, func(_ int, w http.ResponseWriter) {
				http.Error(w, "bad document: "+strings.Repeat("x", 300), code)
			})
			r, _ := newTestReporter(t, manifest.Report{URL: c.URL}, t.TempDir())
			err := r.post(context.Background(), newReportStatus("main@sha1:aaaa").get())
			var ce *collectorError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, code, ce.Status)
			assert.Len(t, ce.Body, reportBodySnippet)
			assert.Len(t, c.received(), 1, "not retried")
			assert.Equal(t, 0, r.Sent())
		})
	}
	t.Run("408 and 429 are retried", func(t *testing.T) {
		t.Parallel()
		c := newReportCollector(t, func(n int, w http.ResponseWriter) {
			switch n {
			case 0:
				w.WriteHeader(http.StatusRequestTimeout)
			case 1:
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		r, _ := newTestReporter(t, manifest.Report{URL: c.URL}, t.TempDir())
		require.NoError(t, r.post(context.Background(), newReportStatus("main@sha1:aaaa").get()))
		assert.Len(t, c.received(), 3)
		assert.Equal(t, 1, r.Sent())
	})
}

func TestReporterWarnsOncePerStatus(t *testing.T) {
	t.Parallel()
	c := newReportCollector(t, func(n int, w http.ResponseWriter) {
		switch {
		case n < 3:
			http.Error(w, "unknown key hdr-secret-7c1", http.StatusUnauthorized)
		case n < 5:
			http.Error(w, "bad document", http.StatusBadRequest)
		}
	})
	r, logs := newTestReporter(t, manifest.Report{URL: c.URL, Interval: manifest.Duration(time.Hour), Headers: map[string]string{
		"Authorization": "Bearer hdr-secret-7c1",
	}}, t.TempDir())
	r.failureWait = 5 * time.Millisecond
	runReporter(t, r, newReportStatus("main@sha1:aaaa"))

	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "collector accepts status reports again") },
		20*time.Second, 5*time.Millisecond)
	assert.Equal(t, 1, r.Sent())
	assert.Len(t, c.received(), 6, "each failed post tried once, then again after a wait")

	var warns []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") {
			warns = append(warns, line)
		}
	}
	require.Len(t, warns, 2, "one warning per distinct status:\n%s", logs)
	assert.Contains(t, warns[0], "httpStatus=401")
	assert.Contains(t, warns[0], "[redacted]", "a header value echoed in the body is redacted")
	assert.Contains(t, warns[1], "httpStatus=400")
	assert.Contains(t, warns[1], "bad document")
	assert.NotContains(t, logs.String(), "hdr-secret-7c1")
}

func TestNewReporterRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  manifest.Report
		want string
	}{
		{"not http", manifest.Report{URL: "ftp://user:pw-secret@collector/x"}, "not an http(s) URL"},
		{"no host", manifest.Report{URL: "https:///status"}, "not an http(s) URL"},
		{"unparsable", manifest.Report{URL: "https://user:pw-secret@collector\x7f/x"}, "not a valid URL"},
		{"negative interval", manifest.Report{URL: "https://c/x", Interval: manifest.Duration(-time.Second)}, "negative"},
		{"bad header name", manifest.Report{URL: "https://c/x", Headers: map[string]string{"X Key": "pw-secret"}}, `"X Key" is not a valid header name`},
		{"bad header value", manifest.Report{URL: "https://c/x", Headers: map[string]string{"X-Key": "pw-secret\nX-Evil: 1"}}, "value of X-Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReporter(tc.cfg, t.TempDir(), nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "pw-secret")
		})
	}
}

// waits counts the times r settles into a wait with nothing to post now;
// call it before r runs.
func waits(r *Reporter) func() int64 {
	var n atomic.Int64
	r.onWait = func(time.Duration) { n.Add(1) }
	return n.Load
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header string
		want   time.Duration
		ok     bool
	}{
		{"", 0, false},
		{"7", 7 * time.Second, true},
		{"Wed, 02 Dec 2026 12:01:30 GMT", 90 * time.Second, true},
		{"Wed, 02 Dec 2026 11:00:00 GMT", 0, true}, // past: at once
		{"soon", 0, false},
		{"-3", 0, false},
	} {
		got, ok := retryAfter(tc.header, now)
		require.Equal(t, tc.ok, ok, tc.header)
		require.Equal(t, tc.want, got, tc.header)
	}
}

func TestReporterSendsTokenFile(t *testing.T) {
	t.Parallel()
	c := newReportCollector(t, nil)
	dir := t.TempDir()
	file := dir + "/token"
	require.NoError(t, os.WriteFile(file, []byte("tok-one-secret\n"), 0o600))
	r, logs := newTestReporter(t, manifest.Report{URL: c.URL, TokenFile: file}, t.TempDir())
	require.NoError(t, r.post(context.Background(), newReportStatus("main@sha1:aaaa").get()))
	require.NoError(t, os.WriteFile(file, []byte("tok-two-secret"), 0o600)) // rotated: read at each post
	require.NoError(t, r.post(context.Background(), newReportStatus("main@sha1:bbbb").get()))
	got := c.received()
	require.Len(t, got, 2)
	assert.Equal(t, "Bearer tok-one-secret", got[0].header.Get("Authorization"))
	assert.Equal(t, "Bearer tok-two-secret", got[1].header.Get("Authorization"))
	assert.Equal(t, "[redacted]", r.redact("tok-two-secret"))
	assert.NotContains(t, logs.String(), "tok-")

	t.Run("missing or empty file", func(t *testing.T) {
		for _, content := range []string{"", "two words"} {
			require.NoError(t, os.WriteFile(file, []byte(content), 0o600))
			err := r.post(context.Background(), newReportStatus("main@sha1:cccc").get())
			require.ErrorContains(t, err, "report.tokenFile "+file+" holds no token")
		}
		r2, _ := newTestReporter(t, manifest.Report{URL: c.URL, TokenFile: dir + "/absent"}, t.TempDir())
		err := r2.post(context.Background(), newReportStatus("main@sha1:cccc").get())
		require.ErrorContains(t, err, "report.tokenFile: open "+dir+"/absent")
		assert.Len(t, c.received(), 2, "nothing posted without a token")
	})
}
