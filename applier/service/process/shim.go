//go:build linux

package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-dev/tend/applier/service"
)

// The log shim sits between an instance and its log file, as conmon does
// for podman: the instance's stdout and stderr are the write end of a
// pipe, the shim reads the other end and writes the file, rotating it at
// the cap as it writes (see rotatingLog). It is tend's own binary
// (/proc/self/exe, so an upgraded binary on disk changes nothing) run
// with argv[0] shimName: every binary that links this package, tend and
// the test binaries alike, turns into the shim at init when called so.
// It starts in its own session, outside the instance's process group and
// cgroup, so it survives the agent as the instance does, and is recorded
// in the instance's handle (Proc.Shim) so that the next agent adopts it
// with the instance. It exits when the pipe closes: once the instance and
// everything it started that holds its output are gone.
const shimName = "tend-logshim"

// shimBuffer is how much the shim reads at once: a pipe's default size.
const shimBuffer = 64 << 10

// drainWait bounds how long the runtime waits, once an instance's process
// is gone, for its shim to write what is left in the pipe and exit. A
// shim still running then has a process the instance left holding the
// pipe; Stop kills it.
const drainWait = 2 * time.Second

func init() {
	if len(os.Args) == 4 && os.Args[0] == shimName {
		os.Exit(shimMain(os.Stdin, os.NewFile(3, os.Args[1]), os.Args[1:]))
	}
}

// shimMain copies in to the log file f, at path args[0], capped at args[1]
// bytes with args[2] rotated copies, until in ends.
func shimMain(in, f *os.File, args []string) int {
	max, err1 := strconv.ParseInt(args[1], 10, 64)
	keep, err2 := strconv.Atoi(args[2])
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", shimName, err)
		return 2
	}
	l, err := newRotatingLog(f, args[0], max, keep)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", shimName, err)
		return 2
	}
	buf := make([]byte, shimBuffer)
	for {
		n, err := in.Read(buf)
		_, _ = l.Write(buf[:n])
		if err == io.EOF {
			return 0
		}
		if err != nil && !errors.Is(err, syscall.EINTR) {
			fmt.Fprintf(os.Stderr, "%s: read output: %v\n", shimName, err)
			return 1
		}
	}
}

// logShim is a shim this runtime started, reaped as soon as it exits.
type logShim struct {
	proc Proc
	cmd  *exec.Cmd
	done chan struct{} // closed once reaped
}

// startShim starts the shim of the log file f at path, reading r. The
// caller closes its copies of f and r once the instance started.
func startShim(path string, f, r *os.File, max int64, keep int) (*logShim, error) {
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{shimName, path, strconv.FormatInt(max, 10), strconv.Itoa(keep)},
		// One thread does. A race-detector build (the tests) would sleep a
		// second at exit, holding up a Wait for the last output.
		Env:        []string{"GOMAXPROCS=1", "GORACE=atexit_sleep_ms=0"},
		Dir:        "/",
		Stdin:      r,
		ExtraFiles: []*os.File{f},
		// Its own session: no signal to the agent's or the instance's
		// group reaches it.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start log shim for %s: %w", path, err)
	}
	// Not reaped yet, so /proc/PID is the shim even if it already exited.
	st, err := readProcStat(cmd.Process.Pid)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("start log shim for %s: %w", path, err)
	}
	s := &logShim{proc: Proc{PID: cmd.Process.Pid, StartTime: st.StartTime}, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	return s, nil
}

// waitShim waits up to drainWait (less when ctx ends) for the shim of p to
// exit, and reports whether it did. c is p's child when this runtime
// started p, nil when it adopted it. An instance without a shim has none
// to wait for.
func (e *Runtime) waitShim(ctx context.Context, c *child, p Proc) bool {
	if p.Shim == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, drainWait)
	defer cancel()
	if c != nil && c.shim != nil {
		select {
		case <-c.shim.done:
			return true
		case <-ctx.Done():
			return false
		}
	}
	f, err := openPidfd(*p.Shim)
	switch {
	case errors.Is(err, errGone):
		return true
	case errors.Is(err, unix.ENOSYS):
		return waitGoneByPolling(ctx, *p.Shim) == nil
	case err != nil:
		return !procAlive(*p.Shim)
	}
	defer f.Close()
	return waitPidfd(ctx, f) == nil
}

// endShim lets the shim of p write what is left and, when it does not
// exit by itself (a process the instance left still holds the pipe),
// kills it: no shim outlives a stopped instance.
func (e *Runtime) endShim(ctx context.Context, c *child, p Proc) {
	if e.waitShim(ctx, c, p) {
		return
	}
	s := *p.Shim
	e.log.Warn("log shim killed: a process the service started still held its output", logKeyPID, p.PID, logKeyShim, s.PID)
	if c != nil && c.shim != nil {
		_ = c.shim.cmd.Process.Kill()
		<-c.shim.done
		return
	}
	f, err := openPidfd(s)
	switch {
	case errors.Is(err, errGone):
	case err != nil:
		if procAlive(s) {
			_ = unix.Kill(s.PID, unix.SIGKILL)
		}
		_ = waitGoneByPolling(ctx, s)
	default:
		_ = pidfdSignal(f, unix.SIGKILL)
		_ = waitPidfd(ctx, f)
		_ = f.Close()
	}
}

// startLog opens the log file of a new instance at path (see openLog) and
// starts its shim; out, the write end of the shim's pipe, is to be the
// instance's stdout and stderr, and closed by the caller once it started.
func (e *Runtime) startLog(path string) (s *logShim, out *os.File, err error) {
	f, err := openLog(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("log pipe for %s: %w", path, err)
	}
	defer r.Close()
	if s, err = startShim(path, f, r, e.logMax, service.LogKeep); err != nil {
		_ = w.Close()
		return nil, nil, err
	}
	return s, w, nil
}
