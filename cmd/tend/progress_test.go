package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
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

// openPTY opens a pseudo-terminal and returns its two ends: what is
// written to the terminal end is read from the other.
func openPTY(t *testing.T) (ptm, tty *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal on this machine: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	require.NoError(t, unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0))
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { tty.Close() })
	return ptm, tty
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
	_, tty := openPTY(t)
	require.NotNil(t, newProgressLine(tty), "a terminal")
}

// tendOnTerminal runs the binary with its stderr on a pseudo-terminal and
// returns stdout, what the terminal received and the exit code.
func tendOnTerminal(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ptm, tty := openPTY(t)
	cmd := exec.Command(tendBin, args...)
	cmd.Env = append(os.Environ(), "TEND_CONFIG=")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	require.NoError(t, cmd.Start())
	tty.Close() // the child has it: reading ends when the child exits
	var screen bytes.Buffer
	_, err := io.Copy(&screen, ptm)
	if !errors.Is(err, syscall.EIO) { // the other end closed
		require.NoError(t, err)
	}
	err = cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), screen.String(), code
}

// tend apply draws the pull of a model on a terminal, and nothing of it
// when its stderr is not one.
func TestApplyShowsPullProgressOnATerminal(t *testing.T) {
	reg := testoci.Start(t)
	weights := bytes.Repeat([]byte("w"), 3<<20)
	reg.PushFiles(t, "models/detector:v8", map[string][]byte{"model.onnx": weights, "labels.txt": []byte("person\n")})
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", distDevice(reg.Host+"/models/detector:v8"))
	repo.Commit("cam-017")

	tty := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
	_, screen, code := tendOnTerminal(t, append([]string{"apply"}, tty.flags...)...)
	require.Equal(t, 0, code, screen)
	m := regexp.MustCompile(`\rpulling model/detector  (\S+ \S+) / (\S+ \S+) \(100%\)`).FindStringSubmatch(screen)
	require.NotNil(t, m, "no finished pull on the terminal:\n%q", screen)
	require.Equal(t, m[1], m[2])
	require.Equal(t, printable.HumanBytes(int64(len(weights))), m[1], "the bytes of the model's blobs")
	require.Regexp(t, `\r\x1b\[K[^\n]*msg="model downloaded"`, screen, "the line is cleared before the next log")

	redirected := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
	_, errOut, code := redirected.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, `msg="model downloaded"`)
	require.NotContains(t, errOut, "pulling")
	require.NotContains(t, errOut, "\r")
}
