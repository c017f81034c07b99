//go:build linux

package process

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
)

// smallTmpfs mounts a tmpfs of size bytes on a new folder, unmounted when
// the test ends. It skips, saying why, where the test cannot mount.
func smallTmpfs(t *testing.T, size int64) string {
	t.Helper()
	requireRoot(t, "mounting a small tmpfs")
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		t.Skipf("cannot mount a tmpfs on %s (%v): run the tests as root outside a container that forbids mounts to cover this", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// logBytes is the size of every file of the log at path: the current one,
// its rotated copies and the last instance's.
func logBytes(t *testing.T, path string) (total int64, files []string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), filepath.Base(path)) {
			continue
		}
		fi, err := e.Info()
		require.NoError(t, err)
		total += fi.Size()
		files = append(files, e.Name())
	}
	return total, files
}

// A service printing as fast as it can (yes into head, far more than
// 100 MB/s) never takes its log over five times the cap: three rotated
// copies, the current file and the last instance's. The stateDir is a
// tmpfs a little larger than that, so output past the bound would fail
// the service's writes (no space left on device) or be dropped.
func TestLogCapHoldsAtFullSpeedOnASmallTmpfs(t *testing.T) {
	t.Parallel()
	const out = 200 << 20 // per instance
	bound := int64(service.LogKeep+2) * service.LogMaxBytes
	dir := smallTmpfs(t, bound+4<<20)
	e := newTestRuntime(t)
	log := filepath.Join(dir, "logs", "spew", "0.log")
	cmd := []string{"/bin/sh", "-c", "yes " + strings.Repeat("y", 100) + " | head -c " + strconv.Itoa(out)}
	for i := range 2 { // the second moves the first's file to .prev
		began := time.Now()
		p := start(t, e, Instance{Service: "spew", Command: cmd, LogFile: log})
		st, err := e.Wait(waitCtx(t), p)
		require.NoError(t, err)
		took := time.Since(began)
		require.False(t, st.Failed(), "instance %d: %s: its output did not fit", i, st)
		total, files := logBytes(t, log)
		t.Logf("instance %d: %d MB in %s (%.0f MB/s); logs %d bytes in %v", i, out>>20, took.Round(time.Millisecond),
			float64(out>>20)/took.Seconds(), total, files)
		require.LessOrEqual(t, total, bound, "%v", files)
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(log), f))
			require.NoError(t, err)
			require.NotContains(t, string(b), "bytes of output dropped", f)
		}
	}
	_, files := logBytes(t, log)
	require.ElementsMatch(t, []string{"0.log", "0.log.1", "0.log.2", "0.log.3", "0.log.prev"}, files)
	for _, f := range []string{"0.log.1", "0.log.2", "0.log.3"} {
		fi, err := os.Stat(filepath.Join(filepath.Dir(log), f))
		require.NoError(t, err)
		require.Greater(t, fi.Size(), int64(service.LogMaxBytes-shimBuffer), "%s: a copy is rotated at the cap", f)
	}
}

// shimOf is the shim p's record names, which must be running.
func shimOf(t *testing.T, p Proc) Proc {
	t.Helper()
	require.NotNil(t, p.Shim, "a process with a log file has a log shim")
	require.True(t, procAlive(*p.Shim), "shim pid %d", p.Shim.PID)
	return *p.Shim
}

// tickLines is a service printing a line every 10ms until stopped.
var tickLines = []string{"/bin/sh", "-c", "while :; do echo tick; sleep 0.01; done"}

// A tend that starts after the one that started a service (as an agent
// restarted) adopts the service and its shim from the record, leaves both
// running (the output keeps reaching the file) and, when it stops the
// service, ends the shim too.
func TestLogShimAdoptedWithItsService(t *testing.T) {
	t.Parallel()
	first := newTestRuntime(t)
	log := filepath.Join(t.TempDir(), "logs", "tick", "0.log")
	p := start(t, first, Instance{Service: "tick", Command: tickLines, LogFile: log})
	shim := shimOf(t, p)
	raw, err := json.Marshal(handle{p, first})
	require.NoError(t, err)

	next := newTestRuntime(t)
	h, err := next.Recover(raw)
	require.NoError(t, err)
	require.True(t, h.Alive())
	adopted := h.(handle).p
	require.Equal(t, p, adopted, "the record names the service and its shim")
	size := func() int64 { fi, err := os.Stat(log); require.NoError(t, err); return fi.Size() }
	was := size()
	require.Eventually(t, func() bool { return size() > was+100 }, 10*time.Second, 10*time.Millisecond,
		"the output keeps reaching the log through the adopted shim")
	require.True(t, procAlive(shim))

	require.NoError(t, h.Stop(waitCtx(t), time.Second))
	assert.True(t, gone(p.PID), "service")
	assert.True(t, gone(shim.PID), "shim pid %d outlived its stopped service", shim.PID)
}

// Stopping a service ends its shim (once the pipe closes), whether the
// service still ran or had exited, and a Wait returns once the shim wrote
// the last of the output.
func TestStoppedServiceLeavesNoShim(t *testing.T) {
	t.Parallel()
	e := newTestRuntime(t)
	for _, tc := range []struct {
		name   string
		cmd    []string
		exited bool
	}{
		{"running", tickLines, false},
		{"exited", []string{"/bin/sh", "-c", "echo last words"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "0.log")
			p := start(t, e, Instance{Service: "stop-" + tc.name, Command: tc.cmd, LogFile: log})
			shim := *p.Shim
			if tc.exited {
				_, err := e.Wait(waitCtx(t), p)
				require.NoError(t, err)
				assert.Equal(t, "last words", readTrim(t, log), "Wait returns once the output is written")
			}
			require.NoError(t, e.Stop(waitCtx(t), p, time.Second))
			assert.True(t, gone(p.PID), "service")
			assert.True(t, gone(shim.PID), "shim pid %d outlived its stopped service", shim.PID)
		})
	}
}

// A process the service left holding its output keeps the pipe open:
// Stop kills the shim after drainWait rather than leave it behind.
func TestStopKillsAShimHeldOpen(t *testing.T) {
	t.Parallel()
	e := newTestRuntime(t)
	dir := t.TempDir()
	log, held := filepath.Join(dir, "0.log"), filepath.Join(dir, "held.pid")
	// setsid: out of the service's group, which Stop kills.
	p := start(t, e, Instance{Service: "held", Command: []string{"/bin/sh", "-c", "setsid sleep 60 & echo $! >" + held + "; echo started; wait"}, LogFile: log})
	shim := shimOf(t, p)
	require.Eventually(t, func() bool { b, _ := os.ReadFile(log); return len(b) > 0 }, 10*time.Second, 5*time.Millisecond)
	b, err := os.ReadFile(held)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	require.NoError(t, e.Stop(waitCtx(t), p, time.Second))
	assert.True(t, gone(shim.PID), "shim pid %d outlived its stopped service", shim.PID)
	assert.Equal(t, "started", readTrim(t, log))
}
