package testoci

import (
	"context"
	"net/http"
	"strings"
	"sync"
)

// Hold is a blob download the registry holds part way (see HoldBlob).
type Hold struct {
	after int64

	held        chan struct{} // closed when a GET is first held
	heldOnce    sync.Once
	release     chan struct{}
	releaseOnce sync.Once
}

// HoldBlob has each GET of blob digest ("sha256:…") send the first after
// bytes of its body, flushed to the client, and then wait until Release,
// or until the client goes away: a download a test catches in the middle
// for as long as it likes. It replaces a hold of that digest.
func (r *Registry) HoldBlob(digest string, after int64) *Hold {
	h := &Hold{after: after, held: make(chan struct{}), release: make(chan struct{})}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holds == nil {
		r.holds = map[string]*Hold{}
	}
	r.holds[digest] = h
	return h
}

// Held is closed once a GET of the blob has sent its first bytes and
// waits.
func (h *Hold) Held() <-chan struct{} { return h.held }

// Release lets the held GETs, and those to come, send the rest.
func (h *Hold) Release() { h.releaseOnce.Do(func() { close(h.release) }) }

// wait flushes what w was given and waits for Release or the end of ctx.
func (h *Hold) wait(ctx context.Context, w http.ResponseWriter) error {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	h.heldOnce.Do(func() { close(h.held) })
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hold returns the hold of the blob a GET asks for, or nil.
func (r *Registry) hold(req *http.Request) *Hold {
	i := strings.LastIndex(req.URL.Path, "/blobs/")
	if i < 0 {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holds[req.URL.Path[i+len("/blobs/"):]]
}
