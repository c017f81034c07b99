//go:build linux

package process

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tend-dev/tend/applier/service"
)

func TestStartIdentitySurvivesRestart(t *testing.T) {
	t.Parallel()
	e := newTestRuntime(t)
	p := start(t, e, Instance{Command: []string{svcBin, "-sleep", "1h"}})
	require.True(t, e.Alive(p))
	require.Empty(t, p.Limits)

	b, err := json.Marshal(p)
	require.NoError(t, err)
	var q Proc
	require.NoError(t, json.Unmarshal(b, &q))
	require.Equal(t, p, q)

	// Another Runtime, as after a restart of tend, knows it by its record.
	after := newTestRuntime(t)
	require.True(t, after.Alive(q))

	t.Run("own session and group", func(t *testing.T) {
		sid, err := unix.Getsid(p.PID)
		require.NoError(t, err)
		pgid, err := syscall.Getpgid(p.PID)
		require.NoError(t, err)
		assert.Equal(t, p.PID, sid)
		assert.Equal(t, p.PID, pgid)
	})
	t.Run("another start time is another process", func(t *testing.T) {
		other := Proc{PID: p.PID, StartTime: p.StartTime + 1}
		assert.False(t, after.Alive(other))
		require.NoError(t, after.Stop(context.Background(), other, time.Second))
		st, err := after.Wait(context.Background(), other)
		require.NoError(t, err)
		assert.False(t, st.Known)
		assert.True(t, e.Alive(p), "stopping a stale record must not touch the process that now has its pid")
	})
	t.Run("stopped by the new Runtime, status seen by the old", func(t *testing.T) {
		type result struct {
			st  service.ExitStatus
			err error
		}
		child, adopted := make(chan result, 1), make(chan result, 1)
		go func() { st, err := e.Wait(waitCtx(t), p); child <- result{st, err} }()
		go func() { st, err := after.Wait(waitCtx(t), q); adopted <- result{st, err} }()
		require.NoError(t, after.Stop(context.Background(), q, 5*time.Second))
		assert.False(t, e.Alive(p))
		r := <-child
		require.NoError(t, r.err)
		assert.Equal(t, service.ExitStatus{Known: true, Code: -1, Signal: "terminated"}, r.st)
		r = <-adopted
		require.NoError(t, r.err)
		assert.Equal(t, service.ExitStatus{}, r.st)
		assert.Equal(t, "exited (status unknown: adopted process)", r.st.String())
	})
}

func TestEnvArgsWorkingDir(t *testing.T) {
	t.Parallel()
	e := newTestRuntime(t)

	t.Run("env is exactly what was declared, plus PATH", func(t *testing.T) {
		info := runPrint(t, e, Instance{
			Command: []string{svcBin, "-print", "two words", "${not-expanded}"},
			Env:     map[string]string{"LOG_LEVEL": "info", "EMPTY": "", "SPACES": "a b"},
		})
		assert.Equal(t, []string{"EMPTY=", "LOG_LEVEL=info", "PATH=" + service.DefaultPath, "SPACES=a b"}, info.Env)
		assert.Equal(t, []string{svcBin, "-print", "two words", "${not-expanded}"}, info.Args)
		assert.Equal(t, "/", info.Cwd)
	})
	t.Run("command looked up in the declared PATH", func(t *testing.T) {
		path := "/nonexistent:" + filepath.Dir(svcBin)
		info := runPrint(t, e, Instance{
			Command:    []string{"svc", "-print"},
			Env:        map[string]string{"PATH": path},
			WorkingDir: t.TempDir(),
		})
		assert.Equal(t, []string{"PATH=" + path}, info.Env)
		assert.Equal(t, "svc", info.Args[0])
	})
	t.Run("working dir", func(t *testing.T) {
		dir := t.TempDir()
		info := runPrint(t, e, Instance{WorkingDir: dir})
		assert.Equal(t, dir, info.Cwd)
	})
}

func TestUserGroup(t *testing.T) {
	requireRoot(t, "switching users")
	t.Parallel()
	nobody, err := user.Lookup("nobody")
	require.NoError(t, err)
	nogroup, err := user.LookupGroup("nogroup")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	ngid, _ := strconv.Atoi(nogroup.Gid)
	e := newTestRuntime(t)

	for _, tc := range []struct {
		name, user, group string
		uid, gid          int
	}{
		{"user and group by name", "nobody", "nogroup", uid, ngid},
		{"user's primary group", "nobody", "", uid, gid},
		{"numeric uid", nobody.Uid, "", uid, gid},
		{"group only", "", "nogroup", 0, ngid},
		{"numeric ids unknown to the node", "4242", "4343", 4242, 4343},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := runPrint(t, e, Instance{User: tc.user, Group: tc.group})
			assert.Equal(t, tc.uid, info.UID)
			assert.Equal(t, tc.gid, info.GID)
			if tc.user == "" {
				assert.Empty(t, info.Groups, "root's supplementary groups are dropped")
			}
		})
	}
}

func TestStartErrorsBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	e := newTestRuntime(t)
	notExec := filepath.Join(t.TempDir(), "script")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644))
	for _, tc := range []struct {
		name string
		in   Instance
		want string
	}{
		{"missing user", Instance{User: "nobdy"},
			`user "nobdy" does not exist on this node: create it or fix services[].user`},
		{"missing group", Instance{Group: "nogrp"},
			`group "nogrp" does not exist on this node: create it or fix services[].group`},
		{"missing command", Instance{Command: []string{"/opt/infer/bin/server", "--model", "x"}},
			`command "/opt/infer/bin/server" not found: no such file on this node; install it or fix services[].command`},
		{"command not in PATH", Instance{Command: []string{"infer-server"}},
			`command "infer-server" not found in PATH "` + service.DefaultPath + `": install it, give an absolute path in services[].command or set PATH in services[].env`},
		{"command not executable", Instance{Command: []string{notExec}},
			`command "` + notExec + `": is not executable (mode -rw-r--r--); fix its mode or services[].command`},
		{"service name with a slash", Instance{Service: "a/b"},
			`invalid instance "a/b" replica 0: a service needs a name without '/' and a replica index from 0`},
		{"empty command", Instance{Command: []string{}},
			`command is empty: set services[].command`},
		{"missing working dir", Instance{WorkingDir: "/nonexistent/dir"},
			`working directory "/nonexistent/dir" does not exist on this node: create it or fix services[].workingDir`},
		{"memory limit below what a process needs", Instance{Memory: 4 << 10},
			`memory limit 4Ki is below the 6Mi a process needs to start: raise services[].resources.memory`},
		{"cpu limit below the kernel's smallest quota", Instance{CPUMilli: 1},
			`cpu limit 1m is below the kernel's smallest quota (10m): raise services[].resources.cpu`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := tc.in
			if in.Service == "" {
				in.Service = "bad"
			}
			if in.Command == nil {
				in.Command = []string{svcBin, "-sleep", "1h"}
			}
			in.LogFile = filepath.Join(t.TempDir(), "logs", "bad.log")
			_, err := e.Run(context.Background(), in)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			assert.ErrorIs(t, err, service.ErrInvalidInstance)
			assert.NoDirExists(t, filepath.Dir(in.LogFile), "nothing was prepared")
			assert.NoDirExists(t, filepath.Join(cgroupMount, "memory", testCgroupParent, "bad-0"))
		})
	}
}

func TestWaitExit(t *testing.T) {
	t.Parallel()
	e := newTestRuntime(t)
	for _, tc := range []struct {
		code   int
		failed bool
	}{{0, false}, {3, true}} {
		t.Run("exit code "+strconv.Itoa(tc.code), func(t *testing.T) {
			p := start(t, e, Instance{Command: []string{svcBin, "-exit", strconv.Itoa(tc.code)}})
			st, err := e.Wait(waitCtx(t), p)
			require.NoError(t, err)
			assert.Equal(t, service.ExitStatus{Known: true, Code: tc.code}, st)
			assert.Equal(t, tc.failed, st.Failed())
			assert.Equal(t, "exit code "+strconv.Itoa(tc.code), st.String())
			assert.False(t, e.Alive(p))
		})
	}
	t.Run("killed by a signal", func(t *testing.T) {
		p := start(t, e, Instance{Command: []string{svcBin, "-sleep", "1h"}})
		require.NoError(t, syscall.Kill(p.PID, syscall.SIGKILL))
		st, err := e.Wait(waitCtx(t), p)
		require.NoError(t, err)
		assert.Equal(t, service.ExitStatus{Known: true, Code: -1, Signal: "killed"}, st)
		assert.Equal(t, "killed by signal killed", st.String())
		assert.True(t, st.Failed())
	})
	t.Run("ctx ends first, a later wait still gets the status", func(t *testing.T) {
		p := start(t, e, Instance{Command: []string{svcBin, "-sleep", "300ms", "-exit", "7"}})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := e.Wait(ctx, p)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		st, err := e.Wait(waitCtx(t), p)
		require.NoError(t, err)
		assert.Equal(t, 7, st.Code)
	})
}

func TestStop(t *testing.T) {
	t.Parallel()
	e := newTestRuntime(t)

	t.Run("SIGTERM ignored: killed after grace, grandchild too", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		ready, gcFile := filepath.Join(dir, "ready"), filepath.Join(dir, "grandchild")
		p := start(t, e, Instance{Command: []string{svcBin, "-ignore-term", "-grandchild", gcFile, "-ready", ready, "-sleep", "1h"}})
		waitFile(t, ready)
		b, err := os.ReadFile(gcFile)
		require.NoError(t, err)
		gpid, err := strconv.Atoi(string(b))
		require.NoError(t, err)
		require.False(t, gone(gpid))

		waited := make(chan service.ExitStatus, 1)
		go func() { st, _ := e.Wait(waitCtx(t), p); waited <- st }()
		const grace = 300 * time.Millisecond
		began := time.Now()
		require.NoError(t, e.Stop(context.Background(), p, grace))
		assert.GreaterOrEqual(t, time.Since(began), grace, "SIGKILL before the grace was up")
		assert.False(t, e.Alive(p))
		assert.Eventually(t, func() bool { return gone(gpid) }, 20*time.Second, 10*time.Millisecond, "grandchild %d outlived Stop", gpid)
		st := <-waited
		// It ignores SIGTERM: only the SIGKILL after the grace ended it.
		assert.Equal(t, service.ExitStatus{Known: true, Code: -1, Signal: "killed"}, st, "Stop must not steal Wait's status")
	})
	t.Run("SIGTERM honoured: gone before grace", func(t *testing.T) {
		t.Parallel()
		p := start(t, e, Instance{Command: []string{svcBin, "-sleep", "1h"}})
		waited := make(chan service.ExitStatus, 1)
		go func() { st, _ := e.Wait(waitCtx(t), p); waited <- st }()
		// An hour of grace: Stop returns once the process is gone, or the
		// test times out.
		require.NoError(t, e.Stop(context.Background(), p, time.Hour))
		assert.False(t, e.Alive(p))
		assert.Equal(t, service.ExitStatus{Known: true, Code: -1, Signal: "terminated"}, <-waited, "ended by SIGTERM, no SIGKILL")
	})
	t.Run("a Wait after Stop still gets the status", func(t *testing.T) {
		t.Parallel()
		p := start(t, e, Instance{Command: []string{svcBin, "-sleep", "1h"}})
		require.NoError(t, e.Stop(context.Background(), p, time.Hour))
		st, err := e.Wait(waitCtx(t), p)
		require.NoError(t, err)
		assert.Equal(t, service.ExitStatus{Known: true, Code: -1, Signal: "terminated"}, st)
	})
	t.Run("already gone", func(t *testing.T) {
		t.Parallel()
		p := start(t, e, Instance{Command: []string{svcBin}})
		st, err := e.Wait(waitCtx(t), p)
		require.NoError(t, err)
		require.False(t, st.Failed())
		require.NoError(t, e.Stop(context.Background(), p, time.Second))
		require.NoError(t, e.Stop(context.Background(), Proc{PID: 1 << 30, StartTime: 1}, time.Second))
	})
	t.Run("ctx ends during grace: killed at once", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		ready := filepath.Join(dir, "ready")
		p := start(t, e, Instance{Command: []string{svcBin, "-ignore-term", "-ready", ready, "-sleep", "1h"}})
		waitFile(t, ready)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := e.Stop(ctx, p, time.Hour)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Eventually(t, func() bool { return !e.Alive(p) }, 20*time.Second, 10*time.Millisecond)
	})
}

// A process tend did not start (or started before a restart) is waited for
// through a pidfd: its status belongs to its parent.
func TestAdopted(t *testing.T) {
	t.Parallel()
	e := newTestRuntime(t)

	t.Run("wait", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(svcBin, "-sleep", "300ms", "-exit", "3")
		require.NoError(t, cmd.Start())
		s, err := readProcStat(cmd.Process.Pid)
		require.NoError(t, err)
		p := Proc{PID: cmd.Process.Pid, StartTime: s.StartTime}
		require.True(t, e.Alive(p))

		began := time.Now()
		st, err := e.Wait(waitCtx(t), p)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, time.Since(began), 200*time.Millisecond)
		assert.Equal(t, service.ExitStatus{}, st)
		assert.True(t, st.Failed())
		assert.False(t, e.Alive(p), "a zombie is not alive")
		require.Error(t, cmd.Wait(), "its parent still gets the real status")
		assert.Equal(t, 3, cmd.ProcessState.ExitCode())
	})
	t.Run("wait, ctx ends first", func(t *testing.T) {
		t.Parallel()
		cmd := exec.Command(svcBin, "-sleep", "1h")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		s, err := readProcStat(cmd.Process.Pid)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err = e.Wait(ctx, Proc{PID: cmd.Process.Pid, StartTime: s.StartTime})
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("stop a process that leads no group", func(t *testing.T) {
		t.Parallel()
		ready := filepath.Join(t.TempDir(), "ready")
		cmd := exec.Command(svcBin, "-ignore-term", "-ready", ready, "-sleep", "1h")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		waitFile(t, ready)
		s, err := readProcStat(cmd.Process.Pid)
		require.NoError(t, err)
		require.NoError(t, e.Stop(context.Background(), Proc{PID: cmd.Process.Pid, StartTime: s.StartTime}, 100*time.Millisecond))
		_ = cmd.Wait()
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		assert.Equal(t, syscall.SIGKILL, ws.Signal())
	})
}

func TestProcStat(t *testing.T) {
	t.Parallel()
	// fakeProc is a /proc holding one stat line, for pid 4242.
	fakeProc := func(t *testing.T, line string) procfs.FS {
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, "4242"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "4242", "stat"), []byte(line), 0o644))
		fs, err := procfs.NewFS(dir)
		require.NoError(t, err)
		return fs
	}
	t.Run("comm with spaces and parentheses", func(t *testing.T) {
		// A full line as Linux 6 writes it: 52 fields, field 22 the start time.
		line := "4242 (a) b (c) d) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 41082880 2423 " +
			"18446744073709551615 1 1 0 0 0 0 0 4096 1256 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
		s, err := statOf(fakeProc(t, line), 4242)
		require.NoError(t, err)
		assert.Equal(t, procStat{State: 'S', StartTime: 987654}, s)
	})
	t.Run("a real process named so", func(t *testing.T) {
		bin := namedProgram(t, "s) (v c")
		e := newTestRuntime(t)
		p := start(t, e, Instance{Command: []string{bin, "-sleep", "1h"}})
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/comm")
		require.NoError(t, err)
		require.Equal(t, "s) (v c\n", string(comm))
		assert.True(t, e.Alive(p))
		assert.NotZero(t, p.StartTime)
	})
	t.Run("truncated", func(t *testing.T) {
		_, err := statOf(fakeProc(t, "4242 (init S 0"), 4242)
		require.Error(t, err)
	})
	t.Run("gone", func(t *testing.T) {
		_, err := statOf(fakeProc(t, ""), 4243)
		require.ErrorIs(t, err, os.ErrNotExist)
	})
}

// namedProgram returns the test program under another name, in a
// folder of its own: a hard link to svcBin, or where one cannot be made,
// a symbolic link (the kernel names a process by the path it was
// exec'd by). Never a copy: a child another test forks while this process
// holds the copy open for writing inherits that descriptor until its own
// exec, and an exec of the copy meanwhile fails with "text file busy".
func namedProgram(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if os.Link(svcBin, bin) != nil {
		require.NoError(t, os.Symlink(svcBin, bin))
	}
	return bin
}

// What the runtime started for an instance is found again by its command
// line and environment, when tend died before it recorded the process.
func TestOrphans(t *testing.T) {
	e := newTestRuntime(t)
	since := time.Now()
	in := Instance{Service: "orphan", Command: []string{svcBin, "-sleep", "1h"}, Env: map[string]string{"TOKEN": strconv.Itoa(os.Getpid())}}
	p := start(t, e, in)
	other := start(t, e, Instance{Service: "other", Command: in.Command, Env: map[string]string{"TOKEN": "x"}})

	found, err := e.FindOrphans(in, since)
	require.NoError(t, err)
	require.Equal(t, []Proc{{PID: p.PID, StartTime: p.StartTime}}, found, "only its own: %d is another instance's", other.PID)

	found, err = e.FindOrphans(in, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Empty(t, found, "started before: not this start's")
}

// An instance started under an invocation is found by it even after its
// command exec'd another program (a wrapper script's `exec "$@"`): its
// command line is not what was started, its environment still names the
// invocation.
func TestOrphansAfterExec(t *testing.T) {
	e := newTestRuntime(t)
	since := time.Now()
	token := strconv.Itoa(os.Getpid())
	in := Instance{Service: "wrapped", Command: []string{"/bin/sh", "-c", `exec "$0" -sleep 1h ` + token, svcBin},
		Invocation: "inv-" + token}
	p := start(t, e, in)
	other := start(t, e, Instance{Service: "wrapped", Command: in.Command, Invocation: "inv-other"})
	require.Eventually(t, func() bool {
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
		return err == nil && strings.HasPrefix(string(cmd), svcBin)
	}, 10*time.Second, 5*time.Millisecond, "the wrapper did not exec")

	found, err := e.FindOrphans(in, since)
	require.NoError(t, err)
	require.Equal(t, []Proc{{PID: p.PID, StartTime: p.StartTime}}, found, "only its own: %d is another invocation", other.PID)

	found, err = e.FindOrphans(in, since.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, found, 1, "a clock stepped back since the start hides it")

	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
	require.NoError(t, err)
	require.Contains(t, strings.Split(string(env), "\x00"), service.InvocationEnv+"="+in.Invocation)
}
