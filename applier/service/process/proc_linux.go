package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// errGone: the process a Proc names is no longer running (it exited, or its
// pid now belongs to another process).
var errGone = errors.New("process gone")

// procStat is what the runtime reads from /proc/PID/stat.
type procStat struct {
	State     byte   // field 3: R, S, D, Z (zombie), X (dead), …
	StartTime uint64 // field 22: clock ticks since boot
}

// proc is /proc, read through prometheus/procfs, whose parser handles a
// comm holding spaces and parentheses. It is opened once it can be.
var proc struct {
	mu sync.Mutex
	fs *procfs.FS
}

func readProcStat(pid int) (procStat, error) {
	mounted, err := procFS()
	if err != nil {
		return procStat{}, err
	}
	return statOf(mounted, pid)
}

// procFS returns /proc, opening it the first time it can.
func procFS() (procfs.FS, error) {
	proc.mu.Lock()
	defer proc.mu.Unlock()
	if proc.fs == nil {
		mounted, err := procfs.NewDefaultFS()
		if err != nil {
			return procfs.FS{}, fmt.Errorf("open /proc: %w", err)
		}
		proc.fs = &mounted
	}
	return *proc.fs, nil
}

// statOf reads the stat of pid in /proc mounted at procFS.
func statOf(procFS procfs.FS, pid int) (procStat, error) {
	p, err := procFS.Proc(pid)
	if err != nil {
		return procStat{}, err
	}
	st, err := p.Stat()
	if err != nil {
		return procStat{}, fmt.Errorf("read /proc/%d/stat: %w", pid, err)
	}
	if st.State == "" {
		return procStat{}, fmt.Errorf("read /proc/%d/stat: no state", pid)
	}
	return procStat{State: st.State[0], StartTime: st.Starttime}, nil
}

// procAlive reports whether p's pid runs, is not a zombie, and started
// when p says.
func procAlive(p Proc) bool {
	if p.PID <= 0 {
		return false
	}
	s, err := readProcStat(p.PID)
	return err == nil && s.StartTime == p.StartTime && s.State != 'Z' && s.State != 'X' && s.State != 'x'
}

// openPidfd returns a pidfd of p, non-blocking so the Go runtime's poller
// watches it. It returns errGone when p no longer runs. The start time is
// checked after the pidfd is open: a pid reused before the open is caught,
// and after the open the pidfd keeps referring to p whatever the pid
// becomes. It returns unix.ENOSYS on kernels before 5.3.
func openPidfd(p Proc) (*os.File, error) {
	if p.PID <= 0 {
		return nil, errGone
	}
	fd, err := unix.PidfdOpen(p.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil, errGone
	}
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", p.PID, err)
	}
	if s, err := readProcStat(p.PID); err != nil || s.StartTime != p.StartTime {
		_ = unix.Close(fd)
		return nil, errGone
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("pidfd of %d: %w", p.PID, err)
	}
	return os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(p.PID)), nil
}

// waitPidfd blocks until the process of pidfd f has exited (a zombie counts)
// or ctx ends. The pidfd turns readable when the process exits; the Go
// runtime's poller waits for that without holding a thread, and a read
// deadline set when ctx ends wakes it.
func waitPidfd(ctx context.Context, f *os.File) error {
	exited := func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err == nil && n > 0
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	err = rc.Read(func(fd uintptr) bool { return exited(fd) })
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// Not pollable by the runtime (should not happen): poll it ourselves.
	var done bool
	for !done {
		if err := rc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, _ := unix.Poll(fds, 100)
			done = n > 0
		}); err != nil {
			return err
		}
		if !done && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// pidfdSignal sends sig to the process of pidfd f. (f.Fd would turn the
// pidfd blocking, out of the runtime's poller.)
func pidfdSignal(f *os.File, sig unix.Signal) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.PidfdSendSignal(int(fd), sig, nil, 0) }); err != nil {
		return err
	}
	return serr
}

// waitGoneByPolling waits for p to stop being alive, reading /proc: the
// fallback for kernels without pidfd_open.
func waitGoneByPolling(ctx context.Context, p Proc) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for procAlive(p) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
