package e2e

// Services end to end: the tend binary running real processes, rolling back
// a commit whose service does not become healthy, and an agent killed with
// SIGKILL whose services keep running and are adopted by the next agent.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

var (
	svcProgOnce sync.Once
	svcProgPath string
)

// svcProg builds the applier's test service program once.
func svcProg(t testing.TB) string {
	t.Helper()
	svcProgOnce.Do(func() {
		svcProgPath = filepath.Join(filepath.Dir(tendBin), "svcprog")
		out, err := exec.Command("go", "build", "-o", svcProgPath, "../../../applier/service/testdata/svcprog").CombinedOutput()
		if err != nil {
			t.Fatalf("build svcprog: %v\n%s", err, out)
		}
	})
	return svcProgPath
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// serviceDevice declares one service per args entry, named svc0, svc1, …,
// each with an HTTP health probe on addr when addr is set.
func serviceDevice(prog, addr string, args ...[]string) string {
	var b strings.Builder
	b.WriteString("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  services:\n")
	for i, a := range args {
		cmd, _ := json.Marshal(append([]string{prog}, a...))
		fmt.Fprintf(&b, "    - name: svc%d\n      command: %s\n      stopTimeout: 2s\n", i, cmd)
		if addr != "" {
			fmt.Fprintf(&b, "      health: {http: \"http://%s/healthz\", startupGrace: 3s}\n", addr)
		}
	}
	return b.String()
}

// servicePID returns the pid recorded for replica 0 of a service, 0 if none
// is alive.
func servicePID(t testing.TB, stateDir, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "services", name, "0.json"))
	if err != nil {
		return 0
	}
	var rec struct {
		Proc struct {
			PID int `json:"pid"`
		} `json:"proc"`
	}
	require.NoError(t, json.Unmarshal(b, &rec))
	if !processAlive(rec.Proc.PID) {
		return 0
	}
	return rec.Proc.PID
}

// processAlive reports whether pid runs: it exists and is not a zombie (an
// exited service whose parent, gone, left it to an init that does not
// reap).
func processAlive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return false
		}
	}
	return true
}

// A commit whose service does not become healthy is rolled back and never
// applied again on this node; a newer commit is.
func TestServiceRollbackQuarantinesCommit(t *testing.T) {
	prog, addr := svcProg(t), freeAddr(t)
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", serviceDevice(prog, addr, []string{"-listen", addr}))
	repo.Commit("web")
	n := newNode(t, repo.Dir())
	t.Cleanup(func() { stopServices(t, n.state) })
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	good := servicePID(t, n.state, "svc0")
	require.NotZero(t, good)

	repo.WriteFile("devices/cam-017/device.yaml", serviceDevice(prog, addr, []string{"-exit", "1", "-after", "100ms"}))
	bad := repo.Commit("broken web")
	_, errOut, code = n.tend("apply")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "service/svc0 did not become healthy")
	require.Contains(t, errOut, "rolled back service/svc0 to what ran before")
	back := servicePID(t, n.state, "svc0")
	require.NotZero(t, back, "nothing runs after the rollback")

	out, errOut, code := n.tend("apply")
	require.Equal(t, 1, code, "a rolled-back commit is still an error")
	require.Contains(t, errOut, "commit "+bad[:12]+" was rolled back on this node: ")
	require.Contains(t, out, "Plan: 0 to add, 0 to change, 0 to delete, 1 unchanged.")
	require.Equal(t, back, servicePID(t, n.state, "svc0"), "the rolled-back commit was tried again")

	repo.WriteFile("devices/cam-017/device.yaml", serviceDevice(prog, addr, []string{"-listen", addr, "-exit", "-1"}))
	repo.Commit("fixed web")
	_, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.NotEqual(t, back, servicePID(t, n.state, "svc0"))
}

// A first commit whose service never becomes healthy is not rolled back
// into nothing nor held against the node: each apply tries it again and
// says why it failed, and a fixed commit is applied.
func TestFirstCommitFailingIsNotQuarantined(t *testing.T) {
	prog, addr := svcProg(t), freeAddr(t)
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", serviceDevice(prog, addr, []string{"-exit", "1", "-after", "100ms"}))
	repo.Commit("broken web")
	n := newNode(t, repo.Dir())
	t.Cleanup(func() { stopServices(t, n.state) })
	for range 2 {
		_, errOut, code := n.tend("apply")
		require.Equal(t, 1, code, errOut)
		require.Contains(t, errOut, "service/svc0 did not become healthy")
		require.Contains(t, errOut, "not rolled back: no revision was applied on this node before")
		require.NotContains(t, errOut, "was rolled back on this node")
	}
	repo.WriteFile("devices/cam-017/device.yaml", serviceDevice(prog, addr, []string{"-listen", addr}))
	repo.Commit("fixed web")
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.NotZero(t, servicePID(t, n.state, "svc0"))
}

// An agent killed with SIGKILL leaves its services running; the next agent
// adopts all ten without restarting one, and restarts one that exits.
func TestAgentKill9AdoptsServices(t *testing.T) {
	prog := svcProg(t)
	var args [][]string
	for range 10 {
		args = append(args, nil)
	}
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", serviceDevice(prog, "", args...))
	repo.Commit("ten services")
	n := newNode(t, repo.Dir(), "--schedule", "@every 1s", "--jitter", "0s")
	t.Cleanup(func() { stopServices(t, n.state) })
	logFile := filepath.Join(t.TempDir(), "agent.log")

	agent := func() *exec.Cmd { return agentProcess(t, n, logFile) }
	pids := func() map[string]int {
		out := map[string]int{}
		for i := range 10 {
			out[fmt.Sprintf("svc%d", i)] = servicePID(t, n.state, fmt.Sprintf("svc%d", i))
		}
		return out
	}
	first := agent()
	eventually(t, func() bool {
		for _, p := range pids() {
			if p == 0 {
				return false
			}
		}
		return true
	})
	before := pids()
	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	require.Equal(t, before, pids(), "services died with the agent")

	agent()
	eventually(t, func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Count(string(b), "msg=reconciled") >= 3
	})
	require.Equal(t, before, pids(), "the new agent restarted a healthy service")
	b, _ := os.ReadFile(logFile)
	require.Equal(t, 10, strings.Count(string(b), "msg=\"service adopted\""), string(b))

	require.NoError(t, syscall.Kill(before["svc3"], syscall.SIGKILL))
	eventually(t, func() bool { p := servicePID(t, n.state, "svc3"); return p != 0 && p != before["svc3"] })
	b, _ = os.ReadFile(logFile)
	// The supervisor saw the exit at once and restarted it after its first
	// backoff step; it was not left for a reconcile to find as drift.
	require.Contains(t, string(b), `msg="service exited; restarting" resource=service/svc3 replica=0 exit="exited (status unknown: adopted process)" in=100ms crashes=1`)
	require.Contains(t, string(b), `msg="service restarted" resource=service/svc3`)
	require.NotContains(t, string(b), "msg=drift device=cam-017 resource=service/svc3")
}

func TestLogs(t *testing.T) {
	prog := svcProg(t)
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", serviceDevice(prog, "", []string{"-exit", "0", "-after", "1s"})+
		"      replicas: 2\n      env: {INDEX: \"${replica}\"}\n      restart: on-failure\n")
	repo.Commit("one service, two replicas")
	n := newNode(t, repo.Dir())
	t.Cleanup(func() { stopServices(t, n.state) })
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	eventually(t, func() bool {
		out, _, _ := n.tend("logs", "service/svc0")
		return strings.Contains(out, "replica 0 | env") && strings.Contains(out, "replica 1 | env")
	})
	out, _, code := n.tend("logs", "service/svc0", "--replica", "1")
	require.Equal(t, 0, code)
	require.Contains(t, out, `"INDEX=1"`)
	require.NotContains(t, out, "replica 1 |", "one replica needs no prefix")

	_, errOut, code = n.tend("logs", "service/svc0", "--replica", "7")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no logs for service/svc0 replica 7")
	_, errOut, code = n.tend("logs", "service/nope")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no logs for service/nope")
	_, errOut, code = n.tend("logs", "file/etc/x")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `"file/etc/x" is not a service: use service/NAME`)
	_, errOut, code = n.tend("logs", "service/svc0", "--previous", "-f")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "logs of service/svc0: --previous prints an instance that has ended: it cannot be followed (drop -f)")

	// -f keeps printing what a new start appends.
	f := exec.Command(tendBin, append([]string{"logs", "service/svc0", "-f", "--replica", "0"}, n.flags...)...)
	var buf lockedBuffer
	f.Stdout = &buf
	require.NoError(t, f.Start())
	t.Cleanup(func() { _ = f.Process.Kill(); _ = f.Wait() })
	eventually(t, func() bool { return strings.Count(buf.String(), "args") == 1 })
	repo.WriteFile("devices/cam-017/device.yaml", serviceDevice(prog, "", []string{"-exit", "0", "-after", "2s"})+
		"      replicas: 2\n      env: {INDEX: \"${replica}\"}\n      restart: on-failure\n")
	repo.Commit("restart it")
	_, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	eventually(t, func() bool { return strings.Count(buf.String(), "args") == 2 })
	require.NoError(t, f.Process.Signal(syscall.SIGTERM))
	require.NoError(t, f.Wait())
}

// lockedBuffer is a bytes.Buffer a child process writes while a test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
