package agent

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A server that did not answer is left alone by the next question and
// for the back-off, which doubles with each failure in a row; an answer,
// a clock set back or another URL end the rest.
func TestServerDownRests(t *testing.T) {
	const a, b = "https://a.example", "https://b.example"
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var d serverDown
	_, ok := d.rests(a, at)
	require.False(t, ok, "a server that never failed is asked")

	d.failed(a, "hub did not answer: "+a, at)
	why, ok := d.rests(a, at.Add(time.Hour))
	require.True(t, ok, "the next question is not asked, however late")
	require.Equal(t, "hub did not answer: "+a, why)
	_, ok = d.rests(a, at.Add(time.Minute-time.Nanosecond))
	require.True(t, ok)
	_, ok = d.rests(b, at)
	require.False(t, ok, "another URL is asked")
	_, ok = d.rests(a, at.Add(time.Minute))
	require.False(t, ok, "asked again once the back-off has passed")

	d.failed(a, "hub did not answer: "+a, at)
	_, ok = d.rests(a, at)
	require.True(t, ok)
	_, ok = d.rests(a, at.Add(time.Minute))
	require.True(t, ok, "the second failure in a row doubles the back-off")
	_, ok = d.rests(a, at.Add(-time.Second))
	require.False(t, ok, "a clock set back before the failure asks at once")

	d.answered(a)
	_, ok = d.rests(a, at)
	require.False(t, ok, "a server that answered is asked")
	d.failed(a, "hub did not answer: "+a, at)
	_, ok = d.rests(a, at)
	require.True(t, ok)
	_, ok = d.rests(a, at.Add(time.Minute))
	require.False(t, ok, "an answer starts the back-off over")
}

// quietServer stands in front of a real server, next: until up, it takes
// each request and never answers it (the asker gives up); then next
// answers. asked counts the requests, and got hears of each.
type quietServer struct {
	next  http.Handler
	up    atomic.Bool
	asked atomic.Int64
	got   chan struct{}
	// stall: while down, send the status line (200) and then nothing.
	stall bool
}

func (q *quietServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q.asked.Add(1)
	q.got <- struct{}{}
	if !q.up.Load() {
		if q.stall {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("o"))
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done() // the device gave up
		return
	}
	q.next.ServeHTTP(w, r)
}

// serveQuiet serves q on a port of its own, and returns its address:
// listening when hangs, else closed until reopen listens on it again.
func serveQuiet(t *testing.T, q *quietServer, hangs bool) (addr string, reopen func()) {
	t.Helper()
	web := httptest.NewUnstartedServer(q)
	t.Cleanup(web.Close)
	addr = web.Listener.Addr().String()
	if hangs {
		web.Start()
		return addr, func() {}
	}
	require.NoError(t, web.Listener.Close())
	return addr, func() {
		t.Helper()
		l, err := net.Listen("tcp", addr)
		require.NoError(t, err)
		web.Listener = l
		web.Start()
	}
}
