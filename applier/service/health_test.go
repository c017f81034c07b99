package service

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
)

// closedTCPAddr returns a loopback address nothing listens on.
func closedTCPAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// statusServer answers every request with the status code status returns.
func statusServer(t *testing.T, status func() int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status())
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestProbeFrom(t *testing.T) {
	require.Nil(t, ProbeFrom(nil, nil))

	expand := func(s string) string { return strings.ReplaceAll(s, "${replica}", "2") }
	p := ProbeFrom(&manifest.Health{
		Exec:             []string{"/bin/check", "--port=808${replica}"},
		StartupGrace:     manifest.Duration(time.Minute),
		Interval:         manifest.Duration(2 * time.Second),
		FailureThreshold: 5,
	}, expand)
	require.Equal(t, &Probe{
		Exec:             []string{"/bin/check", "--port=8082"},
		StartupGrace:     time.Minute,
		Interval:         2 * time.Second,
		FailureThreshold: 5,
	}, p)

	p = ProbeFrom(&manifest.Health{HTTP: "http://127.0.0.1:808${replica}/healthz"}, expand)
	require.Equal(t, "http://127.0.0.1:8082/healthz", p.HTTP)
	p = ProbeFrom(&manifest.Health{TCP: "127.0.0.1:900${replica}"}, nil)
	require.Equal(t, "127.0.0.1:900${replica}", p.TCP, "nil expand leaves strings alone")
}

func TestProbeDefaults(t *testing.T) {
	var p Probe
	require.Equal(t, 30*time.Second, p.grace())
	require.Equal(t, 10*time.Second, p.interval())
	require.Equal(t, 5*time.Second, p.timeout())
	require.Equal(t, 3, p.threshold())

	p = Probe{Interval: 2 * time.Second}
	require.Equal(t, 2*time.Second, p.timeout(), "timeout is never more than the interval")
	p = Probe{Interval: 2 * time.Second, Timeout: 3 * time.Second, FailureThreshold: 1, StartupGrace: time.Second}
	require.Equal(t, 3*time.Second, p.timeout())
	require.Equal(t, 1, p.threshold())
	require.Equal(t, time.Second, p.grace())
}

func TestNilProbe(t *testing.T) {
	var p *Probe
	require.NoError(t, p.Check(t.Context()))
	require.NoError(t, p.WaitHealthy(t.Context(), func() bool { return false }))

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() {
		p.Monitor(ctx, time.Time{}, func(bool, error) { t.Error("onChange called for a nil probe") })
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Monitor of a nil probe did not return when ctx ended")
	}
}

func TestProbeCheck(t *testing.T) {
	ok := statusServer(t, func() int { return http.StatusNoContent })
	unavailable := statusServer(t, func() int { return http.StatusServiceUnavailable })
	notFound := statusServer(t, func() int { return http.StatusNotFound })
	// A redirect to a failing page: the probe must not follow it.
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			http.Redirect(w, r, "/broken", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(redirect.Close)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = listener.Close() })
	go func() {
		for {
			c, err := listener.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	closed := closedTCPAddr(t)

	for _, tc := range []struct {
		name  string
		probe Probe
		want  string // "" = healthy; else the exact error text
	}{
		{"http 2xx", Probe{HTTP: ok.URL + "/healthz"}, ""},
		{"http 3xx is healthy and not followed", Probe{HTTP: redirect.URL + "/healthz"}, ""},
		{"http 503", Probe{HTTP: unavailable.URL + "/healthz"},
			"GET " + unavailable.URL + "/healthz: 503 Service Unavailable"},
		{"http 404", Probe{HTTP: notFound.URL + "/"}, "GET " + notFound.URL + "/: 404 Not Found"},
		{"http connection refused", Probe{HTTP: "http://" + closed + "/healthz"},
			"GET http://" + closed + "/healthz: dial tcp " + closed + ": connection refused"},
		{"http credentials are not shown", Probe{HTTP: "http://admin:secret@" + closed + "/healthz"},
			"GET http://admin:xxxxx@" + closed + "/healthz: dial tcp " + closed + ": connection refused"},
		{"http timeout", Probe{HTTP: hang.URL + "/healthz", Timeout: 100 * time.Millisecond},
			"GET " + hang.URL + "/healthz: timed out after 100ms"},
		{"tcp accepts", Probe{TCP: listener.Addr().String()}, ""},
		{"tcp connection refused", Probe{TCP: closed}, "dial tcp " + closed + ": connection refused"},
		{"exec exits 0", Probe{Exec: []string{"/bin/true"}}, ""},
		{"exec exits 1", Probe{Exec: []string{"/bin/sh", "-c", "exit 1"}}, "exec [/bin/sh -c exit 1]: exit status 1"},
		{"exec output: first line", Probe{Exec: []string{"/bin/sh", "-c", "echo; echo '  model not loaded '; echo more >&2; exit 3"}},
			"exec [/bin/sh -c echo; echo '  model not loaded '; echo more >&2; exit 3]: exit status 3: model not loaded"},
		{"exec stderr", Probe{Exec: []string{"/bin/sh", "-c", "echo oops >&2; exit 1"}},
			"exec [/bin/sh -c echo oops >&2; exit 1]: exit status 1: oops"},
		{"exec timeout kills the group", Probe{Exec: []string{"/bin/sh", "-c", "sleep 5; sleep 5"}, Timeout: 100 * time.Millisecond},
			"exec [/bin/sh -c sleep 5; sleep 5]: timed out after 100ms"},
		{"exec missing program", Probe{Exec: []string{"/nonexistent/check"}},
			`exec [/nonexistent/check]: fork/exec /nonexistent/check: no such file or directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.probe.Check(t.Context())
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tc.want)
		})
	}
}

// An exec probe that times out is killed with every process it started:
// its children do not outlive the check.
func TestProbeCheckTimeoutKillsTheGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	p := Probe{Exec: []string{"/bin/sh", "-c", "sleep 30 & echo $! > " + pidFile + "; wait"}, Timeout: 200 * time.Millisecond}
	err := p.Check(t.Context())
	require.EqualError(t, err, "exec [/bin/sh -c sleep 30 & echo $! > "+pidFile+"; wait]: timed out after 200ms")
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err != nil || strings.Contains(string(st), ") Z ")
	}, 10*time.Second, 10*time.Millisecond, "the probe's child %d still runs", pid)
}

func TestProbeCheckOutputCapped(t *testing.T) {
	p := Probe{Exec: []string{"/bin/sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x; exit 1"}}
	err := p.Check(t.Context())
	require.Error(t, err)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, "exec [/bin/sh -c head -c 100000 /dev/zero | tr '\\0' x; exit 1]: exit status 1: xxx"), msg)
	require.True(t, strings.HasSuffix(msg, "x…"), msg)
	require.Less(t, len(msg), 400)
}

func TestProbeCheckCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := (&Probe{Exec: []string{"/bin/sh", "-c", "sleep 5"}}).Check(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

// fakeClock moves only when a probe waits: After(d) advances it by d and
// fires at once. It records the waits.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func (c *fakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)} }

func TestWaitHealthy(t *testing.T) {
	t.Run("healthy once the server answers", func(t *testing.T) {
		var requests atomic.Int32
		srv := statusServer(t, func() int {
			if requests.Add(1) <= 3 {
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
		clk := newFakeClock()
		p := &Probe{HTTP: srv.URL, Interval: 50 * time.Millisecond, StartupGrace: 3 * time.Second, clock: clk}
		alive := 0
		require.NoError(t, p.WaitHealthy(t.Context(), func() bool { alive++; return true }))
		require.Equal(t, int32(4), requests.Load(), "checked until the first success, and no more")
		require.Equal(t, 4, alive, "alive is called before each check")
		require.Equal(t, []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond}, clk.Waits())
	})

	t.Run("times out wrapping ErrUnhealthy", func(t *testing.T) {
		var checks atomic.Int32
		srv := statusServer(t, func() int { checks.Add(1); return http.StatusServiceUnavailable })
		p := &Probe{HTTP: srv.URL + "/healthz", Interval: 100 * time.Millisecond, StartupGrace: 400 * time.Millisecond, clock: newFakeClock()}
		err := p.WaitHealthy(t.Context(), nil)
		require.ErrorIs(t, err, ErrUnhealthy)
		require.Equal(t, int32(5), checks.Load(), "checks at 0, 100, 200, 300 and 400ms of a 400ms grace")
		require.EqualError(t, err, fmt.Sprintf("unhealthy: not healthy after 400ms (startupGrace 400ms): 5 checks failed, last: GET %s/healthz: 503 Service Unavailable", srv.URL))
	})

	t.Run("durations are rounded in the message", func(t *testing.T) {
		srv := statusServer(t, func() int { return http.StatusServiceUnavailable })
		clk := newFakeClock()
		grace := 19219695232 * time.Nanosecond
		p := &Probe{HTTP: srv.URL, Interval: 5 * time.Second, StartupGrace: grace, clock: clk, started: clk.Now().Add(-time.Millisecond)}
		err := p.WaitHealthy(t.Context(), nil)
		require.Regexp(t, `^unhealthy: not healthy after 19\.2s \(startupGrace 19\.2s\): \d+ checks failed, last: GET `+regexp.QuoteMeta(srv.URL)+`: 503 Service Unavailable$`, err.Error())
	})

	t.Run("the wait is capped by the startup poll", func(t *testing.T) {
		clk := newFakeClock()
		p := &Probe{TCP: closedTCPAddr(t), Interval: time.Minute, StartupGrace: 2 * time.Second, clock: clk}
		require.ErrorIs(t, p.WaitHealthy(t.Context(), nil), ErrUnhealthy)
		require.Equal(t, []time.Duration{startupPoll, startupPoll, startupPoll, startupPoll}, clk.Waits(),
			"a 1 minute interval does not hold back a service that comes up in 1s")
	})

	t.Run("the grace runs from the first start", func(t *testing.T) {
		var checks atomic.Int32
		srv := statusServer(t, func() int { checks.Add(1); return http.StatusServiceUnavailable })
		clk := newFakeClock()
		p := &Probe{HTTP: srv.URL, Interval: 100 * time.Millisecond, StartupGrace: 400 * time.Millisecond, clock: clk,
			started: clk.Now().Add(-250 * time.Millisecond)}
		err := p.WaitHealthy(t.Context(), nil)
		require.Equal(t, int32(3), checks.Load(), "checks at 250, 350 and 400ms of a 400ms grace")
		require.EqualError(t, err, fmt.Sprintf("unhealthy: not healthy after 400ms (startupGrace 400ms): 3 checks failed, last: GET %s: 503 Service Unavailable", srv.URL),
			"the grace declared, and the time since the first start")

		p.started = clk.Now().Add(-time.Second)
		require.ErrorIs(t, p.WaitHealthy(t.Context(), nil), ErrUnhealthy)
		require.Equal(t, int32(4), checks.Load(), "a grace spent before the call still checks once")
	})

	t.Run("last failure is wrapped", func(t *testing.T) {
		p := &Probe{TCP: closedTCPAddr(t), Interval: 10 * time.Millisecond, StartupGrace: 30 * time.Millisecond, clock: newFakeClock()}
		err := p.WaitHealthy(t.Context(), nil)
		require.ErrorIs(t, err, ErrUnhealthy)
		require.ErrorIs(t, err, syscall.ECONNREFUSED)
		require.Regexp(t, `: 4 checks failed, last: dial tcp \S+: connection refused$`, err.Error())
	})

	t.Run("process exits before the first check", func(t *testing.T) {
		clk := newFakeClock()
		p := &Probe{Exec: []string{"/bin/true"}, StartupGrace: 10 * time.Second, clock: clk}
		err := p.WaitHealthy(t.Context(), func() bool { return false })
		require.Empty(t, clk.Waits(), "it returns without waiting for the grace")
		require.ErrorIs(t, err, ErrUnhealthy)
		require.EqualError(t, err, "unhealthy: process exited during startup after 0s")
	})

	t.Run("process exits after failed checks", func(t *testing.T) {
		clk := newFakeClock()
		p := &Probe{Exec: []string{"/bin/sh", "-c", "exit 1"}, Interval: 20 * time.Millisecond, Timeout: 10 * time.Second,
			StartupGrace: 10 * time.Second, clock: clk}
		calls := 0
		err := p.WaitHealthy(t.Context(), func() bool { calls++; return calls <= 2 })
		require.ErrorIs(t, err, ErrUnhealthy)
		require.Len(t, clk.Waits(), 2)
		require.EqualError(t, err, "unhealthy: process exited during startup after 40ms (2 checks failed, last: exec [/bin/sh -c exit 1]: exit status 1)")
	})

	t.Run("ctx ends", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		p := &Probe{TCP: closedTCPAddr(t), Interval: 10 * time.Millisecond}
		err := p.WaitHealthy(ctx, nil)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, ErrUnhealthy, "shutting down is not a failed rollout")
	})
}

func TestMonitor(t *testing.T) {
	// Checks answer from script in order, then keep answering 200: two
	// failures (below the threshold), a success, four failures (unhealthy at
	// the third), a success (healthy again).
	script := []int{200, 503, 503, 200, 503, 503, 503, 503, 200}
	var requests atomic.Int32
	more := make(chan struct{}) // closed once three checks past the script were made
	var once sync.Once
	srv := statusServer(t, func() int {
		n := int(requests.Add(1))
		if n == len(script)+3 {
			once.Do(func() { close(more) })
		}
		if n <= len(script) {
			return script[n-1]
		}
		return http.StatusOK
	})

	type change struct {
		healthy bool
		err     string
		at      int32 // requests served when onChange was called
	}
	var (
		mu      sync.Mutex
		changes []change
	)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	clk := newFakeClock()
	p := &Probe{HTTP: srv.URL + "/healthz", Interval: 10 * time.Millisecond, FailureThreshold: 3, clock: clk}
	go func() {
		defer close(done)
		p.Monitor(ctx, time.Time{}, func(healthy bool, err error) {
			c := change{healthy: healthy, at: requests.Load()}
			if err != nil {
				assert.ErrorIs(t, err, ErrUnhealthy)
				c.err = err.Error()
			}
			mu.Lock()
			changes = append(changes, c)
			mu.Unlock()
		})
	}()
	// More healthy checks after the script must not report anything.
	<-more
	cancel()
	<-done

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []change{
		{healthy: false, at: 7, err: "unhealthy: 3 checks failed in a row, last: GET " + srv.URL + "/healthz: 503 Service Unavailable"},
		{healthy: true, at: 9},
	}, changes)
	for _, w := range clk.Waits() {
		require.Equal(t, 10*time.Millisecond, w, "one check every interval")
	}
}

// A monitor started with an instance gives it its startup grace: failures
// before its first pass, within StartupGrace of its start, do not count
// (a slow start is not stopped while a tick waits for it to come up), and
// FailureThreshold failures after it passed, or after the grace, do.
func TestMonitorGivesAStartItsGrace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script []int // the answers, in order; then 503 for ever
		at     int32 // the check that turns it unhealthy
	}{
		// The checks at 10…50ms fail within the 100ms grace, the one at
		// 60ms passes, which ends the grace: the failures at 70, 80 and
		// 90ms make it unhealthy.
		{name: "slow start", script: []int{503, 503, 503, 503, 503, 200}, at: 9},
		// It never passes: the failures at 10…90ms are within the grace,
		// those at 100, 110 and 120ms count.
		{name: "never up", at: 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var requests atomic.Int32
			srv := statusServer(t, func() int {
				n := int(requests.Add(1))
				if n <= len(tc.script) {
					return tc.script[n-1]
				}
				return http.StatusServiceUnavailable
			})
			clk := newFakeClock()
			p := &Probe{HTTP: srv.URL, Interval: 10 * time.Millisecond, FailureThreshold: 3, StartupGrace: 100 * time.Millisecond, clock: clk}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var at []int32
			p.Monitor(ctx, clk.Now(), func(healthy bool, err error) {
				require.False(t, healthy)
				require.ErrorIs(t, err, ErrUnhealthy)
				at = append(at, requests.Load())
				cancel()
			})
			require.Equal(t, []int32{tc.at}, at)
		})
	}
}
