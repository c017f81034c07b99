package e2e

// The agent in production, end to end: the tend binary serving its
// endpoints while Git breaks and recovers, a broken commit, suspend, and a
// shutdown in the middle of an apply.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// runningAgent is a `tend agent` with its status server on a free port.
type runningAgent struct {
	t    *testing.T
	cmd  *exec.Cmd
	addr string
	log  string
}

func startAgent(t *testing.T, n *node, extra ...string) *runningAgent {
	t.Helper()
	return startAgentAt(t, n, tendBin, extra...)
}

// startAgentAt starts the agent of the tend binary bin (another release
// of tend) as startAgent does.
func startAgentAt(t *testing.T, n *node, bin string, extra ...string) *runningAgent {
	t.Helper()
	a := &runningAgent{t: t, addr: freeAddr(t), log: filepath.Join(t.TempDir(), "agent.log")}
	f, err := os.Create(a.log)
	require.NoError(t, err)
	defer f.Close()
	args := append(append([]string{"agent"}, n.flags...), append([]string{"--listen", a.addr, "--jitter", "0s"}, extra...)...)
	a.cmd = exec.Command(bin, args...)
	a.cmd.Stdout, a.cmd.Stderr = f, f
	require.NoError(t, a.cmd.Start())
	t.Cleanup(func() { _ = a.cmd.Process.Kill(); _ = a.cmd.Wait() })
	eventually(t, func() bool { _, code := a.get("/healthz"); return code == http.StatusOK })
	return a
}

// agentProcess starts `tend agent` for n with its output appended to
// log, killed when the test ends: for tests that kill and start the agent
// again on the same log.
func agentProcess(t *testing.T, n *node, log string) *exec.Cmd {
	t.Helper()
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer f.Close()
	cmd := exec.Command(tendBin, append([]string{"agent"}, n.flags...)...)
	cmd.Stdout, cmd.Stderr = f, f
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func (a *runningAgent) get(path string) (string, int) {
	resp, err := http.Get("http://" + a.addr + path)
	if err != nil {
		return err.Error(), 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

// reconcileNow asks the agent for a tick now (POST /reconcile), which it
// accepts.
func (a *runningAgent) reconcileNow() {
	a.t.Helper()
	resp, err := http.Post("http://"+a.addr+"/reconcile", "", nil)
	require.NoError(a.t, err)
	resp.Body.Close()
	require.Equal(a.t, http.StatusAccepted, resp.StatusCode)
}

func (a *runningAgent) status() map[string]any {
	a.t.Helper()
	body, code := a.get("/status")
	require.Equal(a.t, http.StatusOK, code, body)
	var s map[string]any
	require.NoError(a.t, json.Unmarshal([]byte(body), &s))
	return s
}

func (a *runningAgent) logs() string {
	b, _ := os.ReadFile(a.log)
	return string(b)
}

func (a *runningAgent) stop() {
	a.t.Helper()
	require.NoError(a.t, a.cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- a.cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(a.t, err, a.logs())
	case <-time.After(30 * time.Second):
		a.t.Fatalf("agent did not stop on SIGTERM:\n%s", a.logs())
	}
}

// Git goes down and a broken commit is pushed: the node keeps its last good
// state, lastError says what and where, the loop and the endpoints stay up,
// and the next good commit converges.
func TestAgentEndpointsThroughFailures(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	good := repo.Commit("good")
	srv := testgit.StartHTTP(t, filepath.Dir(repo.Dir()))
	n := newNode(t, repo.URL(srv.URL), "--schedule", "@every 1s")
	a := startAgent(t, n)
	eventually(t, func() bool { return a.status()["appliedRevision"] == "HEAD@sha1:"+good })

	metrics, code := a.get("/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, m := range []string{
		`tend_reconcile_total{result="success"}`, `tend_reconcile_total{result="error"}`, `tend_reconcile_total{result="noop"}`,
		"tend_reconcile_duration_seconds_bucket", `tend_drift_total{kind="file"}`, `tend_drift_total{kind="model"}`,
		`tend_drift_total{kind="service"}`, `tend_applied_revision_info{revision="HEAD@sha1:` + good + `"} 1`,
		"tend_last_success_timestamp_seconds", `tend_source_fetch_total{result="changed"}`,
		`tend_source_fetch_total{result="unchanged"}`, `tend_source_fetch_total{result="error"}`,
		"tend_model_bytes_downloaded_total", "tend_convergence_seconds_bucket", "go_goroutines", "process_resident_memory_bytes",
	} {
		require.Contains(t, metrics, m)
	}

	// A broken commit: lastError names the file and line.
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.9\n", "0x1")))
	repo.Commit("bad mode")
	eventually(t, func() bool { e, _ := a.status()["lastError"].(string); return strings.Contains(e, "device.yaml:") })
	require.Contains(t, a.status()["lastError"], `mode`)
	require.Equal(t, "HEAD@sha1:"+good, a.status()["appliedRevision"])
	require.Equal(t, "threshold: 0.4\n", n.read("etc/infer/config.yaml"))

	// Git down: the loop and the endpoints stay up, lastError names the
	// URL, without credentials.
	srv.Close()
	eventually(t, func() bool { e, _ := a.status()["lastError"].(string); return strings.Contains(e, "unreachable") })
	_, code = a.get("/healthz")
	require.Equal(t, http.StatusOK, code)
	metrics, _ = a.get("/metrics")
	require.Regexp(t, `tend_reconcile_total\{result="error"\} [1-9]`, metrics)

	// A manual reconcile is accepted while it is down.
	a.reconcileNow()

	// Back up with a fixed commit: it converges and lastError clears.
	srv2 := testgit.StartHTTP(t, filepath.Dir(repo.Dir()))
	a.stop()
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.9\n", "")))
	fixed := repo.Commit("fixed")
	n.flags = append(n.flags, "--repo", repo.URL(srv2.URL))
	a = startAgent(t, n)
	eventually(t, func() bool {
		s := a.status()
		return s["appliedRevision"] == "HEAD@sha1:"+fixed && s["lastError"] == ""
	})
	require.Equal(t, "threshold: 0.9\n", n.read("etc/infer/config.yaml"))

	out, _, code := n.tend("status", "--listen", a.addr)
	require.Equal(t, 0, code)
	require.Contains(t, out, "HEAD@sha1:"+fixed)
	a.stop()
}

// Suspended, the agent reverts nothing but reports the drift; resumed, it
// reverts at once.
func TestAgentSuspendAndResume(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	repo.Commit("one file")
	n := newNode(t, repo.Dir(), "--schedule", "@every 1s")
	a := startAgent(t, n)
	eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(n.root, "etc/infer/config.yaml"))
		return err == nil && len(b) > 0
	})

	out, errOut, code := n.tend("suspend", "--reason", "field test")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Suspended")
	n.write("etc/infer/config.yaml", "threshold: 0.99\n")
	eventually(t, func() bool {
		s := a.status()
		drift, _ := s["drift"].([]any)
		return s["suspended"] == true && len(drift) == 1
	})
	// Two more suspended ticks see the drift and leave it.
	ticks := strings.Count(a.logs(), "suspended=true")
	eventually(t, func() bool { return strings.Count(a.logs(), "suspended=true") >= ticks+2 })
	require.Equal(t, "threshold: 0.99\n", n.read("etc/infer/config.yaml"), "a suspended agent applied a change")
	require.Contains(t, a.logs(), "field test")

	n.flags = append(n.flags, "--listen", a.addr)
	out, _, code = n.tend("resume")
	require.Equal(t, 0, code)
	require.Contains(t, out, "Resumed.")
	eventually(t, func() bool { return n.read("etc/infer/config.yaml") == "threshold: 0.4\n" })
	a.stop()
}

// SIGTERM in the middle of an apply of 200 files and a service: the agent
// finishes the plan first, so the node holds the old revision or the new
// one, never part of each. The service's health check holds the plan open
// until the test has seen the signal land mid-plan.
func TestAgentSIGTERMMidApply(t *testing.T) {
	prog := svcProg(t)
	marker := filepath.Join(t.TempDir(), "healthy")
	repo := testgit.NewRepo(t)
	write := func(v, service string) string {
		var entries []string
		for i := range 200 {
			entries = append(entries, entry(fmt.Sprintf("/etc/infer/f%03d", i), v, ""))
		}
		repo.WriteFile("devices/cam-017/device.yaml", files(entries...)+service)
		return repo.Commit(v)
	}
	write("old", "")
	n := newNode(t, repo.Dir(), "--schedule", "@every 1s")
	t.Cleanup(func() { stopServices(t, n.state) })
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	write("new", fmt.Sprintf(`  services:
    - name: infer
      command: [%q]
      stopTimeout: 2s
      health: {exec: ["/bin/sh", "-c", "test -e %s"], interval: 100ms, startupGrace: 2m}
`, prog, marker))

	a := startAgent(t, n, "--log-level", "debug")
	eventually(t, func() bool { return strings.Contains(a.logs(), `msg=applied resource=file/etc/infer/f199`) })
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	eventually(t, func() bool {
		return strings.Contains(a.logs(), `msg="tick ended during an apply; the plan in progress runs to its end"`)
	})
	require.False(t, strings.Contains(a.logs(), "msg=applied resource=service/infer"), "the signal landed after the plan's end")
	require.NoError(t, os.WriteFile(marker, nil, 0o644)) // the service becomes healthy
	a.stop()
	require.True(t, strings.Contains(a.logs(), "msg=applied resource=service/infer"), "the plan did not run to its end")
	seen := map[string]int{}
	for i := range 200 {
		seen[n.read(fmt.Sprintf("etc/infer/f%03d", i))]++
	}
	require.Equal(t, map[string]int{"new": 200}, seen, "a mix of old and new files after SIGTERM")
	require.NotZero(t, servicePID(t, n.state, "infer"))
}

// An agent whose status port is taken does not start: it exits 1 naming
// the address and what to set instead.
func TestAgentFailsOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", files(entry("/etc/infer/config.yaml", "threshold: 0.4\n", "")))
	repo.Commit("one")
	n := newNode(t, repo.Dir())
	_, errOut, code := n.tend("agent", "--listen", ln.Addr().String())
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "listen on "+ln.Addr().String())
	require.Contains(t, errOut, "address already in use")
	require.Contains(t, errOut, "set listen: (or --listen) to another address, or to off for none")
	require.NoDirExists(t, filepath.Join(n.root, "etc"), "nothing was applied")
}

// The status lists each service's replicas with their pid, state,
// restarts, health and last exit, as the agent watches them.
func TestAgentStatusListsServices(t *testing.T) {
	prog, addr := svcProg(t), freeAddr(t)
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", serviceDevice(prog, addr, []string{"-listen", addr}))
	repo.Commit("web")
	n := newNode(t, repo.Dir(), "--schedule", "@every 1s")
	t.Cleanup(func() { stopServices(t, n.state) })
	a := startAgent(t, n)
	defer a.stop()

	replica := func() map[string]any {
		svcs, _ := a.status()["services"].([]any)
		if len(svcs) != 1 {
			return nil
		}
		svc := svcs[0].(map[string]any)
		require.Equal(t, "service/svc0", svc["id"])
		reps := svc["replicas"].([]any)
		require.Len(t, reps, 1)
		return reps[0].(map[string]any)
	}
	eventually(t, func() bool { r := replica(); return r != nil && r["state"] == "running" && r["health"] == "healthy" })
	first := replica()
	require.NotZero(t, first["pid"])
	require.Zero(t, first["restarts"])
	require.Nil(t, first["lastExit"])

	require.NoError(t, syscall.Kill(int(first["pid"].(float64)), syscall.SIGKILL))
	eventually(t, func() bool {
		r := replica()
		return r["restarts"] == 1.0 && r["state"] == "running" && r["pid"] != first["pid"] && r["pid"] != nil
	})
	require.Equal(t, "killed by signal killed", replica()["lastExit"])
}
