package transport

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"

	"golang.org/x/time/rate"
)

// limiters holds the one token bucket of each rate (bytes per second) of
// this process, so every download made with Options of the same MaxRate
// (the model driver's, the OCI source's, a stager's) shares it.
var limiters sync.Map // int64 → *rate.Limiter

// Bounds of a bucket's burst, the most bytes read at once: a tenth of a
// second at the rate, within them.
const (
	minBurst = 32 << 10
	maxBurst = 1 << 20
)

// sharedLimiter returns this process's token bucket for bytesPerSecond,
// made the first time it is asked for; nil for no cap (0 or less).
func sharedLimiter(bytesPerSecond int64) *rate.Limiter {
	if bytesPerSecond <= 0 {
		return nil
	}
	if l, ok := limiters.Load(bytesPerSecond); ok {
		return l.(*rate.Limiter)
	}
	burst := min(max(bytesPerSecond/10, minBurst), maxBurst)
	l, _ := limiters.LoadOrStore(bytesPerSecond, rate.NewLimiter(rate.Limit(bytesPerSecond), int(burst)))
	return l.(*rate.Limiter)
}

// Bounds of the kernel receive buffer of a capped download's connection: a
// quarter of a second at the rate, within them.
const (
	minReadBuffer = 64 << 10
	maxReadBuffer = 4 << 20
)

// readBuffer is the kernel receive buffer of a connection read at most
// bytesPerSecond.
func readBuffer(bytesPerSecond int64) int {
	return int(min(max(bytesPerSecond/4, minReadBuffer), maxReadBuffer))
}

// withReadBuffer has the connection req goes out on receive into a kernel
// buffer of size bytes, not one the kernel grows to megabytes: TCP then
// lets the registry send only a little more than tend reads, so the cap
// holds on the link too, not only between the kernel and tend.
func withReadBuffer(req *http.Request, size int) *http.Request {
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		c := info.Conn
		if tc, ok := c.(*tls.Conn); ok {
			c = tc.NetConn()
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(size) // a hint: the cap holds without it
		}
	}}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
}
