package container

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tend-dev/tend/planner"
)

// Span is the output of one instance of a replica in its container: what
// the container printed since Since, until Until (zero times: from its
// creation, to the end).
type Span struct {
	Container string // "" for an instance not started yet
	Since     time.Time
	Until     time.Time
	// Replaced: another instance was started in its place (in another
	// container when Until is zero).
	Replaced bool
}

// WriteContainerLogs writes the logs of a container service's replicas
// (their spans, by replica; replica < 0: all, each line prefixed with its
// replica when there are several) through the engine's API; with follow,
// until ctx ends.
func (rt *Runtime) WriteContainerLogs(ctx context.Context, w io.Writer, name string, spans map[int]Span, replica int, follow bool) error {
	replicas := slices.Sorted(maps.Keys(spans))
	if replica >= 0 {
		if _, ok := spans[replica]; !ok {
			return fmt.Errorf("no container for %s replica %d: it has not run on this node", planner.ServiceID(name), replica)
		}
		replicas = []int{replica}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(replicas))
	for i, r := range replicas {
		out := w
		if len(replicas) > 1 {
			out = &prefixWriter{w: w, mu: &mu, prefix: fmt.Sprintf("replica %d | ", r)}
		}
		run := func() {
			sp := spans[r]
			if sp.Container == "" {
				errs[i] = fmt.Errorf("%s replica %d has no container yet", planner.ServiceID(name), r)
				return
			}
			errs[i] = rt.LogsBetween(ctx, out, sp.Container, sp.Since, sp.Until, follow)
			if isNotFound(errs[i]) && sp.Replaced && sp.Until.IsZero() {
				errs[i] = fmt.Errorf("%s replica %d: the container of its earlier instance, %s, was removed when tend created a new one in its place (its spec, image or mounts changed, or it was gone or damaged): its output is gone",
					planner.ServiceID(name), r, short(sp.Container))
			}
			if p, ok := out.(*prefixWriter); ok {
				p.flush()
			}
		}
		if !follow {
			run()
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); run() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// prefixWriter writes whole lines to w, each after prefix, holding mu so
// that the lines of several replicas do not interleave.
type prefixWriter struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if err := p.line(p.buf[:i+1]); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
}

func (p *prefixWriter) line(l []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := io.WriteString(p.w, p.prefix+string(l))
	return err
}

// flush writes a last line without its newline.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		_ = p.line(append(p.buf, '\n'))
		p.buf = nil
	}
}
