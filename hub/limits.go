package hub

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
)

// The hub's own bounds on the reports it reads at once (see Options).
const (
	// DefaultMaxInflightBytes bounds the bodies of the reports being read
	// at once: a report reserves its Content-Length (1 MiB, MaxReportBytes,
	// when it sends none) before its body is read.
	DefaultMaxInflightBytes = 64 << 20
	// DefaultMaxReports bounds the reports handled at once, from the token
	// look-up to the commit.
	DefaultMaxReports = 128
	// DefaultMaxConnections bounds the connections tend-hub serves at
	// once; more wait in the kernel's backlog until one closes.
	DefaultMaxConnections = 4096
)

// retryAfter is the range of the Retry-After of a busy answer, in
// seconds: random within it, so that the devices turned away do not all
// come back at once.
const (
	retryAfterMin    = 5
	retryAfterSpread = 11 // 5 to 15 s
)

// Why a report was turned away busy.
var (
	errBusyReports = errors.New("the hub is reading as many reports as it takes at once; try again after Retry-After seconds")
	errBusyBytes   = errors.New("the hub is reading as many bytes of reports as it takes at once; try again after Retry-After seconds")
)

// ResultBusy counts a report turned away 503 because the hub was reading
// as many reports, or bytes of them, as it takes at once.
const ResultBusy = "busy"

// admission holds the bounds on the reports in flight. Neither waits:
// beyond them a report is answered 503 with Retry-After, which the agent
// honours.
type admission struct {
	handlers *semaphore.Weighted
	bytes    *semaphore.Weighted
}

func newAdmission(opts Options) admission {
	return admission{handlers: semaphore.NewWeighted(int64(opts.MaxReports)), bytes: semaphore.NewWeighted(opts.MaxInflightBytes)}
}

// admitted ingests r if fewer than MaxReports reports are being handled;
// else it is busy.
func (s *Server) admitted(w http.ResponseWriter, r *http.Request) (string, int, error) {
	if !s.admit.handlers.TryAcquire(1) {
		return ResultBusy, http.StatusServiceUnavailable, errBusyReports
	}
	defer s.admit.handlers.Release(1)
	return s.ingest(w, r)
}

// reportBudget is the bytes a report reserves: its Content-Length, or
// the most a report may be when it sends none (chunked).
func reportBudget(contentLength int64) int64 {
	if contentLength < 0 || contentLength > MaxReportBytes {
		return MaxReportBytes
	}
	return contentLength
}

// busy answers 503 with a Retry-After.
func busy(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterMin+rand.IntN(retryAfterSpread)))
	http.Error(w, msg, http.StatusServiceUnavailable)
}

// readBody reads a report's body of at most MaxReportBytes into a buffer
// sized by its Content-Length, so that a report takes the bytes it
// reserved and not the doubling of a growing buffer.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, MaxReportBytes)
	size := int64(64 << 10)
	if r.ContentLength >= 0 {
		size = min(r.ContentLength, MaxReportBytes)
	}
	b := make([]byte, 0, size+1) // +1: EOF is seen without growing
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				return b, nil
			}
			return b, err
		}
	}
}

// remoteHost is the address a request came from, without its port: the
// key under which its refusals are logged.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// tokenGiven says, for a log, whether a refused request sent a token: never
// which.
func tokenGiven(tok string) string {
	if tok == "" {
		return "none"
	}
	return "wrong"
}

// startFlush writes, every log window, the summaries of the log lines
// held back in the one that ended, so that a flood that stopped is told.
func (s *Server) startFlush() {
	s.stopFlush, s.flushDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.flushDone)
		tick := time.NewTicker(logWindow)
		defer tick.Stop()
		for {
			select {
			case <-s.stopFlush:
				return
			case <-tick.C:
				s.reportLog.flush(context.Background(), false)
				s.readLog.flush(context.Background(), false)
				s.failLog.flush(context.Background(), false)
			}
		}
	}()
}

// stopFlushing stops startFlush's goroutine and writes the summaries
// left; a second call does nothing.
func (s *Server) stopFlushing() {
	s.flushOnce.Do(func() {
		close(s.stopFlush)
		<-s.flushDone
		s.reportLog.flush(context.Background(), true)
		s.readLog.flush(context.Background(), true)
		s.failLog.flush(context.Background(), true)
	})
}

// askerKey is the context key of the device whose token let a request
// through (see Server.readOrDevice).
type askerKey struct{}

// withAsker marks ctx as a request of device's.
func withAsker(ctx context.Context, device string) context.Context {
	return context.WithValue(ctx, askerKey{}, device)
}

// askerOf is the device a request was made with the token of; "" for
// the read token.
func askerOf(ctx context.Context) string {
	d, _ := ctx.Value(askerKey{}).(string)
	return d
}

// Reasons a read was refused, as tend_hub_reads_refused_total counts them.
const readUnauthorized = "unauthorized"

// boundMetrics count what the hub's bounds turned away or kept quiet.
type boundMetrics struct {
	readsRefused   *prometheus.CounterVec
	logSuppressed  *prometheus.CounterVec
	webhookDropped *prometheus.CounterVec
}

func newBoundMetrics(reg *prometheus.Registry) *boundMetrics {
	m := &boundMetrics{
		readsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tend_hub_reads_refused_total",
			Help: "Reads refused by this hub, by reason: unauthorized (no read token, or a wrong one).",
		}, []string{"reason"}),
		logSuppressed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tend_hub_log_suppressed_total",
			Help: "Log lines this hub did not write, by message: past the first of each remote and result a minute (10 a minute at most), a summary line tells how many.",
		}, []string{"message"}),
		webhookDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tend_hub_webhook_dropped_total",
			Help: "Webhook events not posted, by reason: device_rate (over one device's budget), total_rate (over the hub's budget for the kind), queue_full.",
		}, []string{"reason"}),
	}
	m.readsRefused.WithLabelValues(readUnauthorized)
	for _, msg := range []string{msgReportRefused, msgReadRefused, msgWebhookDropped} {
		m.logSuppressed.WithLabelValues(msg)
	}
	for _, r := range []string{dropDeviceRate, dropTotalRate, dropQueueFull} {
		m.webhookDropped.WithLabelValues(r)
	}
	reg.MustRegister(m.readsRefused, m.logSuppressed, m.webhookDropped)
	return m
}
