package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
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
// (or the default) bounded by o's timeout of silence (see stallTransport).
func (o Options) transport() http.RoundTripper {
	base := o.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	d := o.Timeout
	if d <= 0 {
		d = DefaultTimeout
	}
	return stallTransport{base: base, timeout: d}
}

// stallTransport fails a request that goes timeout without progress:
// waiting for the response's headers, or between two reads of its body
// that return data. The request is cancelled and the error wraps
// ErrStalled.
type stallTransport struct {
	base    http.RoundTripper
	timeout time.Duration
}

// errStall is the cause a stalled request is cancelled with.
var errStall = errors.New("stalled")

func (t stallTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := time.AfterFunc(t.timeout, func() { cancel(errStall) })
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		timer.Stop()
		err = t.explain(ctx, req, err)
		cancel(nil)
		return nil, err
	}
	resp.Body = &stallBody{rc: resp.Body, t: t, req: req, ctx: ctx, cancel: cancel, timer: timer}
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
}

func (b *stallBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if b.moved += n; b.moved >= MinProgress {
		b.moved = 0
		b.timer.Reset(b.t.timeout)
	}
	if err != nil && err != io.EOF {
		err = b.t.explain(b.ctx, b.req, err)
	}
	return n, err
}

func (b *stallBody) Close() error {
	b.once.Do(func() {
		b.timer.Stop()
		b.cancel(nil)
	})
	return b.rc.Close()
}
