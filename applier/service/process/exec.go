//go:build linux

package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-dev/tend/applier/service"
)

// Runtime is the exec runtime: each instance is a process tend forks and
// execs, in its own session, with its cgroup when it has limits. On cgroup
// v2 the process starts inside its cgroup (clone3 CLONE_INTO_CGROUP); on v1
// it is moved in right after exec, so for those few microseconds it runs
// unconfined, and a process it forks in that window stays outside.
type Runtime struct {
	log    *slog.Logger
	logMax int64 // an instance's log file is rotated at this size
	cg     cgroupFS

	mu       sync.Mutex
	children map[Proc]*child // by PID and StartTime; Limits is always ""
	// stopped keeps how the last children Stop saw end, for a Wait that
	// comes after Stop returned (at most maxStopped, oldest dropped).
	stopped      map[Proc]service.ExitStatus
	stoppedOrder []Proc
}

// maxStopped bounds the statuses kept for a Wait after Stop.
const maxStopped = 64

// child is a process this Runtime started. A goroutine reaps it as soon as it
// exits, so it never lingers as a zombie, and keeps its status for Wait.
type child struct {
	cmd  *exec.Cmd
	cg   *instanceCgroup
	shim *logShim      // nil when the output is discarded
	done chan struct{} // closed once reaped and status is set
	// status is how it ended, set before done is closed.
	status service.ExitStatus
}

// NewExec returns the exec runtime. cgroupParent is the name of tend's
// cgroup subtree ("tend"); each instance with limits gets its own cgroup
// "<service>-<replica>" below it. A nil log discards.
func New(cgroupParent string, log *slog.Logger) *Runtime {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{
		log:      log,
		logMax:   service.LogMaxBytes,
		cg:       detectCgroups(cgroupMount, cgroupParent),
		children: map[Proc]*child{},
		stopped:  map[Proc]service.ExitStatus{},
	}
}

func procKey(p Proc) Proc { return Proc{PID: p.PID, StartTime: p.StartTime} }

// Run starts in: the runtime's Start, on its own types. Everything that can be checked before the
// process runs is: the command (looked up in the instance's PATH), the
// working directory, the user and group, the limits. A limit that cannot be
// applied for want of a writable cgroup does not stop the start: Proc.Limits
// says so, and it is logged at Warn.
func (e *Runtime) Run(ctx context.Context, in Instance) (Proc, error) {
	if err := ctx.Err(); err != nil {
		return Proc{}, err
	}
	pre, err := prepare(in)
	if err != nil {
		return Proc{}, err
	}
	var out *os.File
	var shim *logShim
	if in.LogFile != "" {
		if shim, out, err = e.startLog(in.LogFile); err != nil {
			return Proc{}, err
		}
		// The process has its own copy; once it and all it started are
		// gone, the shim reads the end of the pipe and exits.
		defer out.Close()
	}

	name := in.Service + "-" + strconv.Itoa(in.Replica)
	cg, warn, err := e.cg.create(name, in.Memory, in.CPUMilli)
	if err != nil {
		return Proc{}, err
	}
	if warn != "" {
		e.log.Warn("resource limits not applied", logKeyService, in.Service, logKeyReplica, in.Replica, logKeyLimits, warn)
	}
	cmd, placed, err := startIn(func() *exec.Cmd { return pre.command(in, out) }, cg)
	if err != nil {
		_ = cg.remove()
		return Proc{}, startError(in, err)
	}
	pid := cmd.Process.Pid
	// Not reaped yet, so /proc/PID is this process even if it already exited.
	st, err := readProcStat(pid)
	if err == nil && cg != nil && !placed {
		if err = cg.place(pid); err != nil && !procAlive(Proc{PID: pid, StartTime: st.StartTime}) {
			err = nil // it exited before it could be moved: Wait tells how
		}
	}
	if err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
		cg.killAll()
		_ = cg.removeWait()
		return Proc{}, fmt.Errorf("start %s: %w", name, err)
	}

	p := Proc{PID: pid, StartTime: st.StartTime, Limits: warn}
	c := &child{cmd: cmd, cg: cg, shim: shim, done: make(chan struct{})}
	if shim != nil {
		p.Shim = &shim.proc
	}
	e.mu.Lock()
	e.children[procKey(p)] = c
	e.mu.Unlock()
	go e.reap(in, c)

	attrs := []any{logKeyService, in.Service, logKeyReplica, in.Replica, logKeyPID, pid, logKeyCommand, in.Command}
	if cg != nil {
		attrs = append(attrs, logKeyCgroup, cg.dirs())
	}
	e.log.Debug("started", attrs...)
	return p, nil
}

// checked is what prepare found out about an instance before it runs.
type checked struct {
	path, dir string
	cred      *syscall.Credential
}

// prepare checks everything that can be checked before the process runs:
// the instance's name, the command (looked up in its PATH), the working
// directory, the user and group, the limits.
func prepare(in Instance) (checked, error) {
	if in.Service == "" || strings.ContainsRune(in.Service, '/') || in.Service == "." || in.Service == ".." || in.Replica < 0 {
		return checked{}, service.Invalidf("invalid instance %q replica %d: a service needs a name without '/' and a replica index from 0", in.Service, in.Replica)
	}
	if len(in.Command) == 0 {
		return checked{}, service.Invalidf("command is empty: set services[].command")
	}
	c := checked{dir: in.WorkingDir}
	if c.dir == "" {
		c.dir = "/"
	}
	if err := checkWorkingDir(c.dir); err != nil {
		return checked{}, err
	}
	var err error
	if c.path, err = lookCommand(in.Command[0], instancePath(in), c.dir); err != nil {
		return checked{}, err
	}
	if c.cred, err = credential(in); err != nil {
		return checked{}, err
	}
	return c, checkLimits(in.Memory, in.CPUMilli)
}

// command is the process of in, in its own session, writing to out.
func (c checked) command(in Instance, out *os.File) *exec.Cmd {
	cmd := &exec.Cmd{
		Path:        c.path,
		Args:        in.Command,
		Env:         instanceEnv(in),
		Dir:         c.dir,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Credential: c.cred},
	}
	if out != nil {
		cmd.Stdout, cmd.Stderr = out, out
	}
	return cmd
}

// startIn starts a command newCmd makes, directly in cg when the node has
// cgroup v2 and the kernel clone3 with CLONE_INTO_CGROUP (5.7 and later).
// placed reports whether it did; if not, the caller moves the process in.
func startIn(newCmd func() *exec.Cmd, cg *instanceCgroup) (cmd *exec.Cmd, placed bool, err error) {
	cmd = newCmd()
	if cg == nil || cg.mode != cgroupV2 {
		return cmd, false, cmd.Start()
	}
	dir, err := os.Open(cg.dirs()[0])
	if err != nil {
		return cmd, false, fmt.Errorf("open cgroup: %w", err)
	}
	defer dir.Close()
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(dir.Fd())
	err = cmd.Start()
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.E2BIG) || errors.Is(err, unix.EINVAL) {
		// No clone3 or CLONE_INTO_CGROUP in this kernel: start, then move.
		cmd = newCmd()
		return cmd, false, cmd.Start()
	}
	return cmd, err == nil, err
}

// startError says why the process did not start, and what to do.
func startError(in Instance, err error) error {
	if errors.Is(err, syscall.EACCES) && in.User != "" {
		return service.Invalidf("start %q as user %q: %w: that user needs to read and execute it and every folder above it", in.Command[0], in.User, err)
	}
	return fmt.Errorf("start %q: %w", in.Command[0], err)
}

// reap waits for c to exit, reaps it, reads from its cgroup whether the OOM
// killer ended it, removes the cgroup, and publishes the status.
func (e *Runtime) reap(in Instance, c *child) {
	err := c.cmd.Wait()
	st := service.ExitStatus{Known: true}
	if ps := c.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			st.Code, st.Signal = -1, ws.Signal().String()
		} else {
			st.Code = ps.ExitCode()
		}
	} else {
		st = service.ExitStatus{}
		e.log.Warn("wait for process", logKeyPID, c.cmd.Process.Pid, logKeyError, err)
	}
	if st.Signal == syscall.SIGKILL.String() && c.cg.oomKilled() {
		st.OOMKilled, st.MemoryLimit = true, c.cg.memory
	}
	if err := c.cg.remove(); err != nil {
		e.log.Debug("cgroup kept: processes the service started still run in it", logKeyPID, c.cmd.Process.Pid, logKeyError, err)
	}
	e.log.Debug("exited", logKeyService, in.Service, logKeyReplica, in.Replica, logKeyPID, c.cmd.Process.Pid, logKeyStatus, st.String())
	c.status = st
	close(c.done)
}

func (e *Runtime) child(p Proc) *child {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.children[procKey(p)]
}

func (e *Runtime) forget(p Proc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.children, procKey(p))
}

// forgetStopped forgets child c of p once Stop is done with it, keeping
// how it ended for a Wait that has not collected it yet.
func (e *Runtime) forgetStopped(p Proc, c *child) {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := procKey(p)
	if e.children[k] != c {
		return // Wait collected it
	}
	delete(e.children, k)
	select {
	case <-c.done:
	default:
		return
	}
	if len(e.stoppedOrder) == maxStopped {
		delete(e.stopped, e.stoppedOrder[0])
		e.stoppedOrder = e.stoppedOrder[1:]
	}
	e.stopped[k] = c.status
	e.stoppedOrder = append(e.stoppedOrder, k)
}

// takeStopped returns, once, how a child Stop forgot ended.
func (e *Runtime) takeStopped(p Proc) (service.ExitStatus, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, ok := e.stopped[procKey(p)]
	delete(e.stopped, procKey(p))
	return st, ok
}

// Alive implements service.Runtime.
func (e *Runtime) Alive(p Proc) bool { return procAlive(p) }

// Wait implements service.Runtime. A child that Stop ended reports its
// status to a Wait that comes after (once, for the last maxStopped). Once
// the process exited, Wait gives its log shim up to drainWait to write
// what it printed last.
func (e *Runtime) Wait(ctx context.Context, p Proc) (service.ExitStatus, error) {
	if st, ok := e.takeStopped(p); ok {
		return st, nil
	}
	if c := e.child(p); c != nil {
		select {
		case <-c.done:
			e.waitShim(ctx, c, p)
			e.forget(p)
			return c.status, nil
		case <-ctx.Done():
			return service.ExitStatus{}, ctx.Err()
		}
	}
	f, err := openPidfd(p)
	switch {
	case errors.Is(err, errGone):
		return service.ExitStatus{}, nil
	case errors.Is(err, unix.ENOSYS):
		cg := e.cg.instanceOf(p.PID)
		if err := waitGoneByPolling(ctx, p); err != nil {
			return service.ExitStatus{}, err
		}
		e.waitShim(ctx, nil, p)
		return e.adoptedExit(cg), nil
	case err != nil:
		return service.ExitStatus{}, err
	}
	defer f.Close()
	cg := e.cg.instanceOf(p.PID)
	if err := waitPidfd(ctx, f); err != nil {
		return service.ExitStatus{}, err
	}
	e.waitShim(ctx, nil, p)
	return e.adoptedExit(cg), nil
}

// adoptedExit is what can be told of an adopted process that exited: only
// whether the OOM killer struck in its cgroup, which is then removed.
func (e *Runtime) adoptedExit(cg *instanceCgroup) service.ExitStatus {
	var st service.ExitStatus
	if cg.oomKilled() {
		st.OOMKilled, st.MemoryLimit = true, cg.memory
	}
	if err := cg.remove(); err != nil {
		e.log.Debug("cgroup kept: processes the service started still run in it", logKeyError, err)
	}
	return st
}

// Stop implements service.Runtime. Once the process is gone (or grace ran out),
// every process left in its group, in its cgroup when it has one, and
// among its descendants and session as /proc links them (see tree, which
// also finds a child that started a session of its own with setsid), is
// killed too, and its log shim ends (see endShim): nothing the service
// started outlives Stop. When ctx ends
// first, the group is killed at once and ctx's error returned.
func (e *Runtime) Stop(ctx context.Context, p Proc, grace time.Duration) error {
	var gone func(context.Context) error
	var signalLeader func(unix.Signal) error
	var cg *instanceCgroup
	c := e.child(p)
	if c != nil {
		defer e.forgetStopped(p, c)
		select {
		case <-c.done:
			// Exited before: its pid may be another process's by now, so
			// only its cgroup is cleaned up.
			c.cg.killAll()
			if err := c.cg.removeWait(); err != nil {
				e.log.Warn("cgroup kept after stop", logKeyPID, p.PID, logKeyError, err)
			}
			e.endShim(ctx, c, p)
			return nil
		default:
		}
		signalLeader = func(sig unix.Signal) error { return c.cmd.Process.Signal(sig) }
		gone = func(ctx context.Context) error {
			select {
			case <-c.done:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		cg = c.cg
	} else {
		f, err := openPidfd(p)
		switch {
		case errors.Is(err, errGone):
			e.endShim(ctx, nil, p)
			return nil
		case errors.Is(err, unix.ENOSYS):
			gone = func(ctx context.Context) error { return waitGoneByPolling(ctx, p) }
			signalLeader = func(sig unix.Signal) error {
				if !procAlive(p) {
					return nil
				}
				return unix.Kill(p.PID, sig)
			}
		case err != nil:
			return fmt.Errorf("stop pid %d: %w", p.PID, err)
		default:
			defer f.Close()
			gone = func(ctx context.Context) error { return waitPidfd(ctx, f) }
			signalLeader = func(sig unix.Signal) error { return pidfdSignal(f, sig) }
		}
		cg = e.cg.instanceOf(p.PID)
	}

	before := e.tree(p)
	signal(p.PID, signalLeader, unix.SIGTERM)
	gctx, cancel := context.WithTimeout(ctx, grace)
	err := gone(gctx)
	cancel()
	outside := e.freezeTree(p, before)
	signal(p.PID, signalLeader, unix.SIGKILL)
	cg.killAll()
	if err := outside.kill(ctx); err != nil {
		e.log.Warn("stop", logKeyPID, p.PID, logKeyError, err)
	}
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("stop pid %d: %w", p.PID, ctx.Err())
	}
	if err := gone(ctx); err != nil {
		return fmt.Errorf("stop pid %d: %w", p.PID, err)
	}
	if err := cg.removeWait(); err != nil {
		e.log.Warn("cgroup kept after stop", logKeyPID, p.PID, logKeyError, err)
	}
	e.endShim(ctx, c, p)
	e.log.Debug("stopped", logKeyPID, p.PID)
	return nil
}

// signal sends sig to the process group pid leads (every instance is a
// session leader, so its group id is its pid) or, when pid leads no group
// (a process adopted that tend did not start), to the process alone.
func signal(pid int, leader func(unix.Signal) error, sig unix.Signal) {
	if err := unix.Kill(-pid, sig); errors.Is(err, unix.ESRCH) {
		_ = leader(sig)
	}
}
