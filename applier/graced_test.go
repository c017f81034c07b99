package applier

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
)

// syncBuffer is a log every goroutine may write.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // a send for every write, when not nil
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written != nil {
		defer func() { s.written <- struct{}{} }()
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A tick that ends after its apply (its context cancelled once the plan
// is done, as every tick's is) is not logged as one that ended during it;
// a tick that ends during it is.
func TestGracedLogsOnlyATickEndedDuringTheApply(t *testing.T) {
	var log syncBuffer
	a := &Applier{logger: slog.New(slog.NewTextHandler(&log, nil))}
	for range 200 {
		tick, cancel := context.WithCancel(context.Background())
		_, stop := a.graced(tick)
		stop()
		cancel()
	}
	if got := log.String(); got != "" {
		t.Fatalf("ticks that ended after their apply were logged:\n%s", got)
	}
	log.written = make(chan struct{}, 1)
	tick, cancel := context.WithCancel(context.Background())
	ctx, stop := a.graced(tick)
	cancel()
	<-log.written // the watch saw the tick end while the apply ran
	if ctx.Err() != nil {
		t.Fatal("the apply's context ended with the tick, before its grace")
	}
	stop()
	if got := log.String(); !bytes.Contains([]byte(got), []byte("tick ended during an apply")) {
		t.Fatalf("a tick that ended during its apply was not logged: %q", got)
	}
}
