package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testpty"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func visible(b []byte) string {
	return strings.NewReplacer("\r", "<CR>", "\x1b[K", "<EL>").Replace(string(b))
}
func newTestLine(w io.Writer, c *fakeClock) *progressLine { return &progressLine{w: w, now: c.now} }

func TestProgressLine(t *testing.T) {
	var out bytes.Buffer
	clock := &fakeClock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	p := newTestLine(&out, clock)
	log := slog.New(slog.NewTextHandler(p.logWriter(), &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	const total = 48_000_000
	step := func(what string, d time.Duration, done int64) {
		clock.advance(d)
		fmt.Fprintf(&out, "\n# %s\n", what)
		p.Pull("model/detector", done, total)
	}
	log.Info("before any pull: no line to clear")
	step("first bytes: drawn", 0, 1_000_000)
	step("100ms later: not drawn (at most 5 a second)", 100*time.Millisecond, 2_000_000)
	step("a second after the first: rate and time left", 900*time.Millisecond, 13_000_000)
	fmt.Fprintf(&out, "\n# a log line clears the line and draws it again\n")
	log.Warn("download interrupted; resuming")
	step("the download starts over: the rate is counted again", 300*time.Millisecond, 0)
	step("2s later", 2*time.Second, 24_000_000)
	step("the last bytes are drawn at once", 10*time.Millisecond, total)
	fmt.Fprintf(&out, "\n# done: the line is cleared\n")
	p.PullDone("model/detector")
	log.Info("model downloaded")
	p.PullDone("model/detector") // twice: nothing to clear
	golden.Assert(t, "progress.golden", []byte(visible(out.Bytes())))
}

func TestProgressLineFitsTheTerminal(t *testing.T) {
	var out bytes.Buffer
	p := newTestLine(&out, &fakeClock{t: time.Unix(1, 0)})
	p.width = 30
	p.Pull("model/a-model-with-a-long-name", 1, 2)
	require.Equal(t, "\rpulling model/a-model-with-a-\x1b[K", out.String())
}

func TestProgressOnlyOnATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer f.Close()
	require.Nil(t, newProgressLine(f), "a file")
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.Nil(t, newProgressLine(w), "a pipe")
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer null.Close()
	require.Nil(t, newProgressLine(null), "a character device that is not a terminal")
	_, tty := testpty.Open(t)
	require.NotNil(t, newProgressLine(tty), "a terminal")
}
