package service_test

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/process"
	"github.com/tend-dev/tend/internal/testkit/testnode"
)

// fakeClock is a supervisor's clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// The backoff is Docker's: the first restart 100ms after the exit, the
// wait doubling with each quick exit in a row, and ten seconds of running
// starting it over. The supervisor's clock is the test's: an instance
// "runs" ten seconds when the test says so, and the waits are the ones
// the supervisor chose, read from its log, not measured.
func TestServiceBackoffStartsOverAfterRunning(t *testing.T) {
	require.Equal(t, 100*time.Millisecond, service.RestartDelay(1))
	require.Equal(t, 200*time.Millisecond, service.RestartDelay(2))
	require.Equal(t, time.Minute, service.RestartDelay(20))
	n := newNode(t, false, testAllow)
	clk := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	n.Sup.SetClock(clk.Now)
	require.NoError(t, n.Sup.Start(context.Background()))
	n.AllowEmpty = true
	// Its first start dies at once; the ones after run until killed.
	svc := n.service("loop", 1, "-crash-first", filepath.Join(t.TempDir(), "crashed"))
	n.Reconcile(n.declare(svc), "rev")
	running := func(restarts int) int {
		t.Helper()
		var pid int
		eventually(t, func() bool {
			st := n.instances("loop")
			if len(st) != 1 || !st[0].Alive || st[0].Restarts != restarts {
				return false
			}
			pid = st[0].PID
			return true
		}, "not running after its restarts")
		return pid
	}
	pid := running(1)

	clk.Add(10 * time.Second) // it ran for ten seconds: the backoff starts over
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	pid = running(2)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL)) // at once: a quick exit
	running(3)

	require.Equal(t, []restart{
		{Crashes: 1, Delay: 100 * time.Millisecond},
		{Crashes: 1, Delay: 100 * time.Millisecond},
		{Crashes: 2, Delay: 200 * time.Millisecond},
	}, n.log.restarts(t, "loop"))
	st := n.instances("loop")[0]
	require.Equal(t, clk.Now(), st.LastExitAt, "the exit is recorded at its time")
	require.Equal(t, "killed by signal killed", st.LastExit)
}

// invocation is the TEND_INVOCATION_ID an instance of svcprog printed.
var invocation = regexp.MustCompile(service.InvocationEnv + `=([A-Z0-9]+)`)

// tend logs --previous prints the output of the instance that ran before
// the one that runs (each start moves the last instance's file aside),
// and tend logs the current instance's; an instance that exited and was
// not replaced is the last one, for both.
func TestServicePreviousLogs(t *testing.T) {
	n := newNode(t, true, testAllow)
	n.AllowEmpty = true
	n.apply(n.service("web", 1))
	rts := service.RuntimesOf(process.New(testnode.CgroupParent, nil))
	logs := func(previous bool) (string, error) {
		var b bytes.Buffer
		err := service.Logs(context.Background(), &b, rts, n.StateDir, "web", -1, service.LogOptions{Previous: previous})
		return b.String(), err
	}
	first := ""
	eventually(t, func() bool {
		out, _ := logs(false)
		if m := invocation.FindStringSubmatch(out); m != nil {
			first = m[1]
		}
		return first != ""
	}, "the first instance printed nothing")
	_, err := logs(true)
	require.EqualError(t, err, "no logs of an earlier instance of service/web in "+filepath.Join(n.StateDir, "logs", "web")+
		": none has restarted since it started on this node (tend logs without --previous prints the ones that run)")
	var b bytes.Buffer
	err = service.Logs(context.Background(), &b, rts, n.StateDir, "web", 0, service.LogOptions{Previous: true, Follow: true})
	require.EqualError(t, err, "logs of service/web: --previous prints an instance that has ended: it cannot be followed (drop -f)")

	pid := n.pids("web")[0]
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	second := ""
	eventually(t, func() bool {
		out, _ := logs(false)
		if m := invocation.FindStringSubmatch(out); m != nil && m[1] != first {
			second = m[1]
		}
		return second != ""
	}, "the restarted instance printed nothing")
	cur, err := logs(false)
	require.NoError(t, err)
	require.NotContains(t, cur, first, "tend logs prints the instance that runs")
	prev, err := logs(true)
	require.NoError(t, err)
	require.Contains(t, prev, first, "tend logs --previous prints the killed instance")
	require.NotContains(t, prev, second)

	// Stopped and not replaced: its own file is the last instance's.
	require.NoError(t, n.Sup.Halt(context.Background(), "web", 0, time.Second))
	prev, err = logs(true)
	require.NoError(t, err)
	require.Contains(t, prev, second)
}
