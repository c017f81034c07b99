package testoci

import (
	"net/http"
	"strings"
	"sync"
)

// RequestLog counts a registry's requests by kind: "ping", "HEAD
// manifest", "GET manifest", "GET blob", else METHOD PATH.
type RequestLog struct {
	mu    sync.Mutex
	count map[string]int
}

// CountRequests has r count every request it serves from now on.
func (r *Registry) CountRequests() *RequestLog {
	l := &RequestLog{count: map[string]int{}}
	r.Use(func(_ http.ResponseWriter, req *http.Request) bool {
		l.mu.Lock()
		l.count[requestKind(req)]++
		l.mu.Unlock()
		return false
	})
	return l
}

func requestKind(r *http.Request) string {
	switch {
	case r.URL.Path == "/v2/" || r.URL.Path == "/v2":
		return "ping"
	case strings.Contains(r.URL.Path, "/manifests/"):
		return r.Method + " manifest"
	case strings.Contains(r.URL.Path, "/blobs/"):
		return r.Method + " blob"
	}
	return r.Method + " " + r.URL.Path
}

// Take returns the counts since the last Take, and starts afresh.
func (l *RequestLog) Take() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.count
	l.count = map[string]int{}
	return c
}
