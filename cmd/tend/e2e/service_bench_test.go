package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// agentBenchNode is a device for benchmarks reading its manifests from repoURL.
func agentBenchNode(b *testing.B, repoURL string) *node {
	dir := b.TempDir()
	n := &node{root: filepath.Join(dir, "root"), state: filepath.Join(dir, "state")}
	mustRun(b, "mkdir", "-p", n.root)
	mustRun(b, "sh", "-c", "printf 'apiVersion: tend.dev/v1alpha1\\nkind: AgentConfig\\n' > "+filepath.Join(dir, "none.yaml"))
	n.flags = []string{"--repo", repoURL, "--device", "cam-017", "--path", "devices/{device}", "--root", n.root,
		"--state-dir", n.state, "--allow-path", "/etc/infer", "--log-format", "json", "--config", filepath.Join(dir, "none.yaml"),
		"--jitter", "0s", "--listen", "off"}
	b.Cleanup(func() { stopServices(b, n.state) })
	return n
}

// startBenchAgent starts `tend agent` for n until the benchmark ends.
func startBenchAgent(b *testing.B, n *node, extra ...string) *exec.Cmd {
	cmd := exec.Command(tendBin, append(append([]string{"agent"}, n.flags...), extra...)...)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// benchAgent makes a device with ten services and returns it, a function
// that lists the pid of each service, and one that starts its agent.
func benchAgent(b *testing.B) (*node, func() []int, func() *exec.Cmd) {
	prog := svcProg(b)
	var args [][]string
	for range 10 {
		args = append(args, nil)
	}
	repo := testgit.NewRepo(b)
	repo.WriteFile("devices/cam-017/device.yaml", serviceDevice(prog, "", args...))
	repo.Commit("ten services")
	n := agentBenchNode(b, repo.Dir())
	pids := func() []int {
		var out []int
		for i := range 10 {
			out = append(out, servicePID(b, n.state, fmt.Sprintf("svc%d", i)))
		}
		return out
	}
	return n, pids, func() *exec.Cmd { return startBenchAgent(b, n, "--schedule", "@every 1s") }
}

func waitFor(b *testing.B, ok func() bool) {
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			b.Fatal("timed out")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func allRunning(pids []int) bool { return !slices.Contains(pids, 0) }

// BenchmarkServiceRestartLatency kills each of ten services of a running
// agent once with SIGKILL and reports the time until its replacement runs:
// p50 and p90 (target: p50 < 1 s).
func BenchmarkServiceRestartLatency(b *testing.B) {
	n, pids, start := benchAgent(b)
	start()
	waitFor(b, func() bool { return allRunning(pids()) })
	for b.Loop() {
		var ds []time.Duration
		for i := range 10 {
			name := fmt.Sprintf("svc%d", i)
			old := servicePID(b, n.state, name)
			t0 := time.Now()
			if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
				b.Fatal(err)
			}
			waitFor(b, func() bool { p := servicePID(b, n.state, name); return p != 0 && p != old })
			ds = append(ds, time.Since(t0))
		}
		slices.Sort(ds)
		b.ReportMetric(millis(ds[len(ds)/2]), "p50-ms")
		b.ReportMetric(millis(ds[len(ds)*9/10]), "p90-ms")
	}
}

// BenchmarkAgentRestart restarts the agent (SIGTERM, then a new one) under
// ten healthy services and reports how many services were restarted
// (target: 0) and how long the new agent took to its first reconcile.
func BenchmarkAgentRestart(b *testing.B) {
	_, pids, start := benchAgent(b)
	agent := start()
	waitFor(b, func() bool { return allRunning(pids()) })
	for b.Loop() {
		before := pids()
		_ = agent.Process.Signal(syscall.SIGTERM)
		_ = agent.Wait()
		t0 := time.Now()
		agent = start()
		time.Sleep(1500 * time.Millisecond) // at least one tick
		restarted := 0
		for i, p := range pids() {
			if p != before[i] {
				restarted++
			}
		}
		b.ReportMetric(float64(restarted), "restarts")
		b.ReportMetric(millis(time.Since(t0)), "observed-ms")
	}
}
