package gitsource

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// MaxReadBytes bounds what tend reads from a Git server over one HTTP
// connection, and so in one Fetch (its connections are closed when it
// ends, not kept for the next tick's): a server that sends refs (or a
// pack) without end cannot grow tend's memory or disk without bound within
// the fetch timeout. A fleet repo fetch is far smaller; past the bound the
// fetch fails (and the node is held at its last applied commit).
var MaxReadBytes int64 = 256 << 20

// httpTransport is the transport of every HTTP(S) connection to a Git
// server that go-git does not configure on its own (see init).
var httpTransport *http.Transport

// closeIdle closes the idle connections to Git servers at the end of a
// Fetch, so that the next starts with fresh ones and a fresh MaxReadBytes.
func closeIdle() { httpTransport.CloseIdleConnections() }

// errTooMuch says a server sent more than MaxReadBytes on one connection.
type errTooMuch struct{ addr string }

func (e errTooMuch) Error() string {
	return fmt.Sprintf("%s sent more than %d MiB on one connection: tend stops reading; check source.url", e.addr, MaxReadBytes>>20)
}

// cappedConn is a connection that fails its reads past MaxReadBytes.
type cappedConn struct {
	net.Conn
	read atomic.Int64
}

func (c *cappedConn) Read(b []byte) (int, error) {
	if c.read.Load() >= MaxReadBytes {
		return 0, errTooMuch{c.RemoteAddr().String()}
	}
	n, err := c.Conn.Read(b)
	c.read.Add(int64(n))
	return n, err
}

func init() {
	// go-git's HTTP transport clones this one for a CA bundle or a proxy,
	// keeping its dialer, so every HTTP(S) connection to a Git server is
	// capped.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &cappedConn{Conn: conn}, nil
	}
	httpTransport = tr
	c := githttp.NewClient(&http.Client{Transport: tr})
	client.InstallProtocol("http", c)
	client.InstallProtocol("https", c)
}
