package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Timeouts of the status server: it answers from memory, so a client that
// takes longer is stuck or hostile.
const (
	serverReadHeaderTimeout = 5 * time.Second
	serverReadTimeout       = 10 * time.Second
	serverWriteTimeout      = 30 * time.Second
	serverIdleTimeout       = 60 * time.Second
)

// Log keys of the status server.
const (
	keyServerAddr   = "addr"
	keyServerQueued = "queued"
)

// Server serves the agent's endpoints: GET /healthz, GET /status, GET
// /metrics and POST /reconcile.
type Server struct {
	addr    string
	tracker *Tracker
	metrics *Metrics
	trigger func() bool
	alive   func() bool
	log     *slog.Logger

	srv *http.Server
	wg  sync.WaitGroup
}

// NewServer returns the server that will listen on addr. Trigger queues a
// tick and reports whether it did (false: one is already queued); alive
// reports whether the loop is running.
func NewServer(addr string, t *Tracker, m *Metrics, trigger func() bool, alive func() bool, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{addr: addr, tracker: t, metrics: m, trigger: trigger, alive: alive, log: log}
	mux := http.NewServeMux()
	// Method patterns: any other method gets 405 with an Allow header.
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /status", s.status)
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("POST /reconcile", s.reconcile)
	s.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: serverReadHeaderTimeout,
		ReadTimeout:       serverReadTimeout,
		WriteTimeout:      serverWriteTimeout,
		IdleTimeout:       serverIdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return s
}

// Start listens and serves in the background until Stop. It returns the
// address it listens on, which names the port when addr asked for any
// (":0"). Requests carry ctx's values, not its end: Stop lets those in
// flight finish.
func (s *Server) Start(ctx context.Context) (net.Addr, error) {
	s.srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s for /healthz, /status and /metrics: %w", s.addr, err)
	}
	s.wg.Go(func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("status server stopped", keyServerAddr, ln.Addr().String(), keyError, err.Error())
		}
	})
	return ln.Addr(), nil
}

// serverStopGrace is how long Stop lets requests in flight finish.
const serverStopGrace = 5 * time.Second

// Stop stops the server, letting requests in flight finish for a few
// seconds.
func (s *Server) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), serverStopGrace)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.log.Warn("status server stopped with requests in flight", keyError, err.Error())
	}
	s.wg.Wait()
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.alive != nil && !s.alive() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "reconcile loop not running")
		return
	}
	fmt.Fprintln(w, "ok")
}

func (s *Server) status(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.tracker.Status())
}

func (s *Server) reconcile(w http.ResponseWriter, _ *http.Request) {
	queued := s.trigger != nil && s.trigger()
	s.log.Debug("reconcile requested", keyServerQueued, queued)
	writeJSON(w, http.StatusAccepted, struct {
		Queued bool `json:"queued"`
	}{queued})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // reasons name "<directory>"
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(b.Bytes())
}
