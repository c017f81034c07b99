package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultTimeout is how long a registry may take to answer a request, and
// then go without sending a byte of its body, when Options set none.
const DefaultTimeout = time.Minute

// MinProgress is what a body must send within each timeout to count as
// moving (with the default timeout, about 0.5 KB/s); a body that ends
// sooner is done, however small.
const MinProgress = 32 << 10

// ErrStalled: the registry answered nothing for the timeout (a hung server,
// a black-holed network), or sent less than MinProgress bytes in it (a
// server that trickles a byte now and then). Requests are bounded by
// progress, not by length, so a big download that keeps moving is never
// cut.
var ErrStalled = errors.New("registry stalled")

// transport returns the RoundTripper every request of o goes through: o's
// (or the default) bounded by o's timeout of silence, its bodies read no
// faster than o's MaxRate (see stallTransport).
func (o Options) transport() http.RoundTripper {
	base := o.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	d := o.Timeout
	if d <= 0 {
		d = DefaultTimeout
	}
	bps := o.MaxRate.BytesPerSecond()
	return stallTransport{base: base, timeout: d, limit: sharedLimiter(bps), readBuffer: readBuffer(bps)}
}

// stallTransport fails a request that goes timeout without progress:
// waiting for the response's headers, or between two reads of its body
// that return data. The request is cancelled and the error wraps
// ErrStalled. With a limit, each read of a body takes at most the
// limit's burst and then waits for as many tokens; that wait is tend's
// own doing and does not count as the registry's silence.
type stallTransport struct {
	base    http.RoundTripper
	timeout time.Duration
	limit   *rate.Limiter // nil: no cap
	// readBuffer is the kernel receive buffer of a capped connection.
	readBuffer int
}

// errStall is the cause a stalled request is cancelled with.
var errStall = errors.New("stalled")

func (t stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.limit != nil {
		req = withReadBuffer(req, t.readBuffer)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	deadline := time.Now().Add(t.timeout)
	timer := time.AfterFunc(t.timeout, func() { cancel(errStall) })
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		timer.Stop()
		err = t.explain(ctx, req, err)
		cancel(nil)
		return nil, err
	}
	resp.Body = &stallBody{rc: resp.Body, t: t, req: req, ctx: ctx, cancel: cancel, timer: timer, deadline: deadline}
	return resp, nil
}

// explain wraps err as ErrStalled when the request was cancelled for it.
func (t stallTransport) explain(ctx context.Context, req *http.Request, err error) error {
	if !errors.Is(context.Cause(ctx), errStall) {
		return err
	}
	return fmt.Errorf("%w: %s sent nothing, or less than %d bytes, for %s (%s %s); check the registry and the network",
		ErrStalled, req.URL.Host, MinProgress, t.timeout, req.Method, req.URL.Path)
}

// stallBody is a response body whose reads keep its request alive.
type stallBody struct {
	rc     io.ReadCloser
	t      stallTransport
	req    *http.Request
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	once   sync.Once
	moved  int // bytes read since the timer was last reset
	// deadline is when the timer fires: the last reset plus the timeout,
	// plus the time spent waiting for the limit since.
	deadline time.Time
}

func (b *stallBody) Read(p []byte) (int, error) {
	if l := b.t.limit; l != nil && len(p) > l.Burst() {
		p = p[:l.Burst()]
	}
	n, err := b.rc.Read(p)
	if b.moved += n; b.moved >= MinProgress {
		b.moved = 0
		b.deadline = time.Now().Add(b.t.timeout)
		b.timer.Reset(b.t.timeout)
	}
	if err != nil && err != io.EOF {
		err = b.t.explain(b.ctx, b.req, err)
	}
	if n > 0 && b.t.limit != nil {
		if werr := b.wait(n); werr != nil && (err == nil || err == io.EOF) {
			err = werr
		}
	}
	return n, err
}

// wait takes n tokens of the limit, waiting for them with the timer of
// silence stopped: the time waited moves its deadline.
func (b *stallBody) wait(n int) error {
	r := b.t.limit.ReserveN(time.Now(), n) // n ≤ burst: always possible
	delay := r.Delay()
	if delay <= 0 {
		return nil
	}
	if !b.timer.Stop() {
		// It fired: the registry was silent before this wait began, the
		// request is being cancelled, and the next read says so.
		r.Cancel()
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-b.ctx.Done():
		r.Cancel()
		return context.Cause(b.ctx)
	}
	b.deadline = b.deadline.Add(delay)
	b.timer.Reset(time.Until(b.deadline))
	return nil
}

func (b *stallBody) Close() error {
	b.once.Do(func() {
		b.timer.Stop()
		b.cancel(nil)
	})
	return b.rc.Close()
}
