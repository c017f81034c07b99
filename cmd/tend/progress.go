package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/oci/transport"
)

// progressInterval is how often the progress line is drawn at most.
const progressInterval = 200 * time.Millisecond

// progressLine draws the pull of a model on one line of a terminal:
// bytes, rate and time left, rewritten in place (\r) at most every
// progressInterval and cleared when the pull ends. Logs written through
// it (logWriter) clear the line first and draw it again after, so the two
// never mix. It implements transport.Meter.
type progressLine struct {
	mu    sync.Mutex
	w     io.Writer
	now   func() time.Time
	width int // of the terminal; 0 when unknown

	name  string    // of the pull shown, "" when none
	start time.Time // when its rate is counted from
	base  int64     // bytes done then
	drawn time.Time // when the line was last drawn, zero before
	line  string    // on screen, "" when none
}

var _ transport.Meter = (*progressLine)(nil)

// newProgressLine returns a progress line on f when f is a terminal, and
// nil otherwise: redirected output, a log file or a test never gets one.
func newProgressLine(f *os.File) *progressLine {
	fd := int(f.Fd())
	if !term.IsTerminal(fd) {
		return nil
	}
	width, _, err := term.GetSize(fd)
	if err != nil {
		width = 0
	}
	return &progressLine{w: f, now: time.Now, width: width}
}

// Pull implements transport.Meter.
func (p *progressLine) Pull(name string, done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if name != p.name || done < p.base {
		// A new pull, or a download that started over.
		p.name, p.start, p.base, p.drawn = name, now, done, time.Time{}
	}
	if done < total && !p.drawn.IsZero() && now.Sub(p.drawn) < progressInterval {
		return
	}
	p.drawn = now
	p.draw(p.describe(name, done, total, now))
}

// PullDone implements transport.Meter.
func (p *progressLine) PullDone(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if name != p.name {
		return
	}
	p.clear()
	p.name, p.line = "", ""
}

// describe is the line for a pull: "pulling model/x  12.0 MB / 48.0 MB
// (25%)  4.0 MB/s  ETA 9s".
func (p *progressLine) describe(name string, done, total int64, now time.Time) string {
	s := fmt.Sprintf("pulling %s  %s / %s", name, printable.HumanBytes(done), printable.HumanBytes(total))
	if total > 0 {
		s += fmt.Sprintf(" (%d%%)", done*100/total)
	}
	elapsed := now.Sub(p.start)
	if moved := done - p.base; moved > 0 && elapsed > 0 {
		rate := float64(moved) / elapsed.Seconds()
		s += fmt.Sprintf("  %s/s", printable.HumanBytes(int64(rate)))
		if left := total - done; left > 0 {
			eta := time.Duration(float64(left) / rate * float64(time.Second))
			s += "  ETA " + eta.Round(time.Second).String()
		}
	}
	if p.width > 1 && len(s) >= p.width {
		s = s[:p.width-1] // a wrapped line could not be rewritten in place
	}
	return s
}

// draw replaces the line on screen with s.
func (p *progressLine) draw(s string) {
	p.line = s
	_, _ = io.WriteString(p.w, "\r"+s+"\x1b[K")
}

// clear erases the line on screen, if any.
func (p *progressLine) clear() {
	if p.line != "" {
		_, _ = io.WriteString(p.w, "\r\x1b[K")
	}
}

// logWriter returns a writer for logs that keeps them off the progress
// line.
func (p *progressLine) logWriter() io.Writer { return progressLogWriter{p} }

type progressLogWriter struct{ p *progressLine }

func (w progressLogWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	w.p.clear()
	n, err := w.p.w.Write(b)
	if w.p.line != "" {
		w.p.draw(w.p.line)
	}
	return n, err
}
