package service

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/tend-dev/tend/manifest"
)

// ErrUnhealthy: a service instance did not become healthy within its
// startup grace, exited during startup, or failed FailureThreshold checks in
// a row. After an update it is what triggers a rollback.
var ErrUnhealthy = errors.New("unhealthy")

// Probe defaults, for a zero field.
const (
	DefaultStartupGrace     = 30 * time.Second
	DefaultInterval         = 10 * time.Second
	DefaultTimeout          = 5 * time.Second // upper bound; never more than the interval
	DefaultFailureThreshold = 3

	// startupPoll caps the interval between checks during startup, so a
	// service that comes up in 1s is not held back by a 10s interval.
	startupPoll = 500 * time.Millisecond
	// execOutputCap is how much of an exec probe's output is kept.
	execOutputCap = 4 << 10
	// execWaitDelay is how long an exec probe's output pipes may stay open
	// after it was killed (a grandchild may hold them).
	execWaitDelay = time.Second
)

// Probe is a service's health check, from manifest.Health, with every ${…}
// and ${replica} already expanded.
type Probe struct {
	HTTP             string        // GET; healthy on 2xx/3xx
	TCP              string        // host:port accepts a connection
	Exec             []string      // exits 0 (run with a timeout; its output is kept for the message, capped)
	StartupGrace     time.Duration // how long a new instance may take to become healthy; 0 = DefaultStartupGrace (30s)
	Interval         time.Duration // between checks; 0 = DefaultInterval (10s)
	Timeout          time.Duration // of one check; 0 = min(Interval, 5s)
	FailureThreshold int           // consecutive failures that make a healthy instance unhealthy; 0 = 3

	// clock paces WaitHealthy and Monitor; nil is the real one. A check's
	// own Timeout is real time always.
	clock clock
	// started, when set, is when the start WaitHealthy judges began (its
	// first attempt): the grace runs from it, not from the call.
	started time.Time
}

// clock is what a probe waits with.
type clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// realClock is time itself.
type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (p *Probe) clk() clock {
	if p.clock == nil {
		return realClock{}
	}
	return p.clock
}

// ProbeFrom returns the probe h declares, with expand applied to the URL,
// the address and every exec argument. A nil h gives a nil probe; a nil
// expand leaves the strings as they are.
func ProbeFrom(h *manifest.Health, expand func(string) string) *Probe {
	if h == nil {
		return nil
	}
	if expand == nil {
		expand = func(s string) string { return s }
	}
	p := &Probe{
		StartupGrace:     h.StartupGrace.D(),
		Interval:         h.Interval.D(),
		FailureThreshold: h.FailureThreshold,
	}
	if h.HTTP != "" {
		p.HTTP = expand(h.HTTP)
	}
	if h.TCP != "" {
		p.TCP = expand(h.TCP)
	}
	for _, a := range h.Exec {
		p.Exec = append(p.Exec, expand(a))
	}
	return p
}

func (p *Probe) grace() time.Duration {
	if p.StartupGrace > 0 {
		return p.StartupGrace
	}
	return DefaultStartupGrace
}

func (p *Probe) interval() time.Duration {
	if p.Interval > 0 {
		return p.Interval
	}
	return DefaultInterval
}

func (p *Probe) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return min(p.interval(), DefaultTimeout)
}

func (p *Probe) threshold() int {
	if p.FailureThreshold > 0 {
		return p.FailureThreshold
	}
	return DefaultFailureThreshold
}

// Check runs the probe once, within Timeout. The error says what failed:
// `GET http://127.0.0.1:8080/healthz: 503 Service Unavailable`,
// `dial tcp 127.0.0.1:9000: connection refused`,
// `exec [/bin/check]: exit status 1: <first line of output>`.
// A nil probe always passes.
func (p *Probe) Check(ctx context.Context) error {
	if p == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	switch {
	case p.HTTP != "":
		return p.checkHTTP(ctx, cctx)
	case p.TCP != "":
		return p.checkTCP(ctx, cctx)
	case len(p.Exec) > 0:
		return p.checkExec(ctx, cctx)
	}
	return errors.New("health probe has no http, tcp or exec")
}

// healthClient does not follow redirects (a 3xx is healthy), does not keep
// connections (each check opens one, as a fresh client would), ignores
// HTTP_PROXY (the service is local) and, like the kubelet, does not verify
// the certificate of an https probe: it asks whether the service answers,
// not who it is.
var healthClient = &http.Client{
	Transport: &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// checkHTTP runs the http probe with cctx, the check's context derived from
// ctx; the same for the other kinds.
func (p *Probe) checkHTTP(ctx, cctx context.Context) error {
	where := p.HTTP
	if u, err := url.Parse(p.HTTP); err == nil {
		where = u.Redacted()
	}
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, p.HTTP, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", where, err)
	}
	req.Header.Set("User-Agent", "tend-health-probe")
	resp, err := healthClient.Do(req)
	if err != nil {
		if err := p.checkCtxErr(ctx, cctx); err != nil {
			return fmt.Errorf("GET %s: %w", where, err)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("GET %s: %w", where, plainDialError(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: %s", where, resp.Status)
	}
	return nil
}

func (p *Probe) checkTCP(ctx, cctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(cctx, "tcp", p.TCP)
	if err != nil {
		if err := p.checkCtxErr(ctx, cctx); err != nil {
			return fmt.Errorf("dial tcp %s: %w", p.TCP, err)
		}
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err
		}
		var se *os.SyscallError
		if errors.As(err, &se) {
			err = se.Err
		}
		return fmt.Errorf("dial tcp %s: %w", p.TCP, err)
	}
	return conn.Close()
}

func (p *Probe) checkExec(ctx, cctx context.Context) error {
	cmd := exec.CommandContext(cctx, p.Exec[0], p.Exec[1:]...)
	out := &cappedOutput{max: execOutputCap}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, killed whole on timeout: a shell script's
	// children must not outlive the check.
	ownProcessGroup(cmd)
	cmd.WaitDelay = execWaitDelay
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if cerr := p.checkCtxErr(ctx, cctx); cerr != nil {
		err = cerr
	}
	if line := firstOutputLine(out.Bytes()); line != "" {
		return fmt.Errorf("exec %v: %w: %s", p.Exec, err, line)
	}
	return fmt.Errorf("exec %v: %w", p.Exec, err)
}

// checkCtxErr says why a check failed when its context ended first: the
// caller's ctx ended, or the check ran out of Timeout. It is nil when cctx is
// still live (the failure is the check's own).
func (p *Probe) checkCtxErr(ctx, cctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %s", roundDuration(p.timeout()))
	}
	return nil
}

// plainDialError drops the syscall name from a dial error:
// "dial tcp 127.0.0.1:80: connection refused" rather than "…: connect:
// connection refused". errors.Is still sees the errno.
func plainDialError(err error) error {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return err
	}
	var se *os.SyscallError
	if !errors.As(op.Err, &se) {
		return err
	}
	c := *op
	c.Err = se.Err
	return &c
}

// cappedOutput keeps the first max bytes written to it and drops the rest,
// without failing the writer.
type cappedOutput struct {
	buf bytes.Buffer
	max int
}

func (w *cappedOutput) Write(b []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

func (w *cappedOutput) Bytes() []byte { return w.buf.Bytes() }

// roundDuration prints d for a message: to the millisecond under a
// second, to a tenth of a second under a minute, else to the second
// (400ms, 19.2s, 2m5s), never with the nanoseconds Duration.String
// gives a measured time or a startupGrace written to the nanosecond.
func roundDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// firstOutputLine is the first non-blank line of out, trimmed and cut to 200
// bytes.
func firstOutputLine(out []byte) string {
	for line := range strings.Lines(string(out)) {
		if line = strings.TrimSpace(line); line != "" {
			if len(line) > 200 {
				line = line[:200] + "…"
			}
			return line
		}
	}
	return ""
}

// WaitHealthy checks every min(Interval, 500ms) until the first success,
// within StartupGrace measured from now (or from started, when set; it
// checks once at least): a check started within the grace
// may finish up to Timeout after it. It returns nil once healthy, or an error
// wrapping ErrUnhealthy (and the last failure) that says how long it waited,
// how many checks failed and the last failure. alive, if non-nil, is called
// before each check: when it returns false (the process died) WaitHealthy
// returns at once with an error wrapping ErrUnhealthy that says the process
// exited during startup. When ctx ends first it returns ctx's error, not
// ErrUnhealthy. A nil probe returns nil at once.
func (p *Probe) WaitHealthy(ctx context.Context, alive func() bool) error {
	if p == nil {
		return nil
	}
	clk := p.clk()
	start := clk.Now()
	if !p.started.IsZero() {
		start = p.started
	}
	since := func() string { return roundDuration(clk.Now().Sub(start)) }
	deadline := start.Add(p.grace())
	poll := min(p.interval(), startupPoll)
	failed := 0
	var last error
	for {
		if alive != nil && !alive() {
			if last != nil {
				return fmt.Errorf("%w: process %w during startup after %s (%d checks failed, last: %w)",
					ErrUnhealthy, errExited, since(), failed, last)
			}
			return fmt.Errorf("%w: process %w during startup after %s", ErrUnhealthy, errExited, since())
		}
		err := p.Check(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("wait for health: %w", ctx.Err())
		}
		failed++
		last = err
		left := deadline.Sub(clk.Now())
		if left <= 0 {
			return fmt.Errorf("%w: not healthy after %s (startupGrace %s): %d checks failed, last: %w",
				ErrUnhealthy, since(), roundDuration(p.grace()), failed, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for health: %w", ctx.Err())
		case <-clk.After(min(poll, left)):
		}
	}
}

// Monitor checks every Interval until ctx ends and calls onChange(healthy,
// err) when the state flips: unhealthy after FailureThreshold consecutive
// failures (err wraps ErrUnhealthy and the last failure), healthy again after
// one success (err is nil). It starts as healthy and calls onChange from its
// own goroutine, one call at a time. started is when the instance started:
// until it first passes a check, a failure within StartupGrace of started
// does not count, so an instance is not stopped while it may still be
// coming up (WaitHealthy judges a start); one still failing when its grace
// ends turns unhealthy after FailureThreshold more failures. A nil probe
// returns when ctx ends.
func (p *Probe) Monitor(ctx context.Context, started time.Time, onChange func(healthy bool, err error)) {
	if p == nil {
		<-ctx.Done()
		return
	}
	clk := p.clk()
	healthy, failed := true, 0
	graceEnds, passed := started.Add(p.grace()), false
	// One check every interval from the start, as a ticker: a slow check
	// does not push the later ones back, and none piles up behind it.
	next := clk.Now()
	for {
		next = next.Add(p.interval())
		wait := next.Sub(clk.Now())
		if wait < 0 {
			next, wait = clk.Now(), 0
		}
		select {
		case <-ctx.Done():
			return
		case <-clk.After(wait):
		}
		err := p.Check(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			failed, passed = 0, true
			if !healthy {
				healthy = true
				onChange(true, nil)
			}
		case !passed && clk.Now().Before(graceEnds):
			// Still in its startup grace: not a failure yet.
		case healthy:
			failed++
			if failed >= p.threshold() {
				healthy = false
				onChange(false, fmt.Errorf("%w: %d checks failed in a row, last: %w", ErrUnhealthy, failed, err))
			}
		}
	}
}
