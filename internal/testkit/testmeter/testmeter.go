// Package testmeter measures what a server does for benchmarks: the
// requests it answers and the bytes it sends (counted by a handler in
// front of it, or by a client's transport), and the CPU time of a server
// process or of the child processes a server ran (the git http-backend
// CGI).
package testmeter

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Meter counts requests and response body bytes. Safe for concurrent use.
type Meter struct {
	Requests, Bytes atomic.Int64
}

// Handler serves h, counting each request and the bytes h writes.
func (m *Meter) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.Requests.Add(1)
		h.ServeHTTP(countingWriter{w, &m.Bytes}, r)
	})
}

// Transport sends requests through base (http.DefaultTransport when nil),
// counting each request and the bytes of each response body read.
func (m *Meter) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		m.Requests.Add(1)
		resp, err := base.RoundTrip(r)
		if err == nil {
			resp.Body = countingBody{resp.Body, &m.Bytes}
		}
		return resp, err
	})
}

// Reset sets both counts to zero.
func (m *Meter) Reset() {
	m.Requests.Store(0)
	m.Bytes.Store(0)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.ResponseWriter.Write(p)
}

// Flush passes a flush on, for a server that streams.
func (c countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// ChildrenCPU is the CPU time, user and system, of the child processes
// this process has waited for (a CGI handler waits for each).
func ChildrenCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcessCPU is the CPU time process pid has used so far, from
// /proc/PID/stat (in clock ticks of 10 ms).
func ProcessCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Past the command name in parentheses: state is field 3, utime 14,
	// stime 15, in clock ticks (USER_HZ, 100 on Linux).
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q, stime %q", pid, fields[11], fields[12])
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
