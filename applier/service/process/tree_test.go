//go:build linux

package process

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var sleepSeq atomic.Int64

// sleepArg is a duration for sleep(1) that no other process has on its
// command line, so a test finds its own sleeps, and the number in it.
func sleepArg() (string, int64) {
	n := sleepSeq.Add(1)
	return fmt.Sprintf("600.%d%d", os.Getpid(), n), n
}

// withArg lists the running processes (zombies left out) whose first
// argument is arg: the sleeps of a test and the shells that start them.
func withArg(t *testing.T, arg string) []int {
	t.Helper()
	mounted, err := procFS()
	require.NoError(t, err)
	procs, err := mounted.AllProcs()
	require.NoError(t, err)
	var out []int
	for _, p := range procs {
		cmd, err := p.CmdLine()
		if err != nil || len(cmd) < 2 || cmd[1] != arg || gone(p.PID) {
			continue
		}
		out = append(out, p.PID)
	}
	return out
}

// A service's child that starts a session of its own (setsid) is in
// neither the service's process group nor its session: Stop kills it all
// the same, whether this runtime started the service or a runtime before
// it did (adopted). Without a cgroup, it is found under /proc, a
// descendant of the service; with one, in the cgroup, even once its
// parent is gone and no link leads to it.
func TestStopKillsSetsidChild(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		cgroup  bool
		adopted bool
	}{
		{name: "no cgroup: descendants under /proc"},
		{name: "no cgroup, adopted: descendants under /proc", adopted: true},
		{name: "cgroup", cgroup: true},
		{name: "cgroup, adopted", cgroup: true, adopted: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newTestRuntime(t)
			arg, n := sleepArg()
			in := Instance{Service: "setsid-" + strconv.FormatInt(n, 10)}
			if tt.cgroup {
				requireRoot(t, "making cgroups")
				if e.cg.mode == cgroupNone {
					t.Skipf("no cgroup hierarchy under %s to make the service's cgroup in", cgroupMount)
				}
				// The setsid child is left behind by a shell that exits,
				// so only the cgroup leads to it; the script waits to be
				// in its cgroup first (v1 moves it in after the start).
				in.Memory = 64 << 20
				in.Command = []string{"sh", "-c", `until grep -q "$0" /proc/self/cgroup; do :; done; sh -c "setsid sleep $1 &"; exec sleep $1`,
					"/" + testCgroupParent + "/" + in.Service + "-0", arg}
			} else {
				e.cg = detectCgroups(t.TempDir(), testCgroupParent) // no cgroup hierarchy: the /proc path
				in.Command = []string{"sh", "-c", "setsid sleep $0 & exec sleep $0", arg}
			}
			p := start(t, e, in)
			t.Cleanup(func() {
				for _, pid := range withArg(t, arg) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			// Both run as sleep, the child in a session of its own.
			require.Eventually(t, func() bool {
				pids := withArg(t, arg)
				return len(pids) == 2 && !slices.ContainsFunc(pids, func(pid int) bool {
					s, err := readSession(pid)
					return err != nil || (pid == p.PID) != (s == p.PID)
				})
			}, 10*time.Second, 5*time.Millisecond, "the service and its setsid child never both ran")

			stopper := e
			if tt.adopted {
				stopper = newTestRuntime(t)
				stopper.cg = e.cg
			}
			require.NoError(t, stopper.Stop(context.Background(), p, 100*time.Millisecond))
			assert.Empty(t, withArg(t, arg), "a sleep of the service outlived Stop")
		})
	}
}

// readSession reads the session of pid.
func readSession(pid int) (int, error) {
	mounted, err := procFS()
	if err != nil {
		return 0, err
	}
	p, err := mounted.Proc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	return st.Session, err
}

func TestDescendants(t *testing.T) {
	t.Parallel()
	leader := Proc{PID: 100, StartTime: 10}
	procs := map[int]procLink{
		100: {ppid: 1, session: 100, start: 10},
		101: {ppid: 100, session: 100, start: 11}, // child
		102: {ppid: 101, session: 102, start: 12}, // its setsid child
		103: {ppid: 102, session: 102, start: 13}, // and that one's
		104: {ppid: 1, session: 100, start: 14},   // in the session, its parent gone
		105: {ppid: 1, session: 105, start: 15},   // unrelated
		200: {ppid: 1, session: 200, start: 20},   // a pid reused: root 200@5 is gone
		201: {ppid: 200, session: 200, start: 21},
	}
	for _, tt := range []struct {
		name   string
		leader Proc
		roots  []Proc
		want   []int
	}{
		{name: "descendants and session", leader: leader, want: []int{101, 102, 103, 104}},
		{name: "from a root the leader lost", leader: Proc{PID: 300, StartTime: 30}, roots: []Proc{{PID: 102, StartTime: 12}}, want: []int{103}},
		{name: "a leader whose pid is another's", leader: Proc{PID: 100, StartTime: 9}},
		{name: "a root whose pid is another's", leader: Proc{PID: 300, StartTime: 30}, roots: []Proc{{PID: 200, StartTime: 5}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for _, p := range descendants(procs, tt.leader, tt.roots) {
				got = append(got, p.PID)
				assert.Equal(t, procs[p.PID].start, p.StartTime)
			}
			slices.Sort(got)
			assert.Equal(t, tt.want, got)
		})
	}
}
