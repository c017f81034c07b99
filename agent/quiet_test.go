package agent

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

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
