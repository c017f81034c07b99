package e2e

// The log shim of a process service, end to end: the tend binary starts
// it, an agent killed with SIGKILL leaves it running with its service,
// the next agent adopts both, and removing the service ends both.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// instanceProcs are the pids a service's record names for replica 0: the
// service's and its log shim's (0 when none).
func instanceProcs(t *testing.T, stateDir, name string) (pid, shim int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "services", name, "0.json"))
	if err != nil {
		return 0, 0
	}
	var rec struct {
		Proc struct {
			PID  int `json:"pid"`
			Shim *struct {
				PID int `json:"pid"`
			} `json:"shim"`
		} `json:"proc"`
	}
	require.NoError(t, json.Unmarshal(b, &rec))
	if rec.Proc.Shim != nil {
		shim = rec.Proc.Shim.PID
	}
	return rec.Proc.PID, shim
}

func TestLogShimSurvivesAgentRestartAndEndsWithItsService(t *testing.T) {
	const tickDevice = "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  services:\n" +
		"    - name: tick\n      command: [/bin/sh, -c, 'while :; do echo tick; sleep 0.05; done']\n      stopTimeout: 2s\n"
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", tickDevice)
	repo.Commit("a service that prints")
	n := newNode(t, repo.Dir(), "--schedule", "@every 1s", "--jitter", "0s")
	t.Cleanup(func() { stopServices(t, n.state) })
	agentLog := filepath.Join(t.TempDir(), "agent.log")
	agent := func() *exec.Cmd { return agentProcess(t, n, agentLog) }
	logFile := filepath.Join(n.state, "logs", "tick", "0.log")
	logSize := func() int64 {
		fi, err := os.Stat(logFile)
		if err != nil {
			return 0
		}
		return fi.Size()
	}

	first := agent()
	var pid, shim int
	eventually(t, func() bool {
		pid, shim = instanceProcs(t, n.state, "tick")
		return processAlive(pid) && processAlive(shim) && logSize() > 0
	})
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(shim) + "/cmdline")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(cmdline), "tend-logshim\x00"+logFile+"\x00"), "%q", cmdline)

	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	require.True(t, processAlive(pid), "the service died with the agent")
	require.True(t, processAlive(shim), "the log shim died with the agent")
	was := logSize()
	eventually(t, func() bool { return logSize() > was }) // no agent: the shim writes on

	agent()
	eventually(t, func() bool {
		b, _ := os.ReadFile(agentLog)
		return strings.Count(string(b), "msg=reconciled") >= 2
	})
	b, _ := os.ReadFile(agentLog)
	require.Contains(t, string(b), `msg="service adopted" resource=service/tick`)
	p2, s2 := instanceProcs(t, n.state, "tick")
	require.Equal(t, []int{pid, shim}, []int{p2, s2}, "the next agent restarted the service or its shim")
	require.True(t, processAlive(pid) && processAlive(shim))

	repo.WriteFile("devices/cam-017/device.yaml", strings.Replace(tickDevice, "name: tick", "name: other", 1))
	repo.Commit("another service in its place")
	eventually(t, func() bool { return !processAlive(pid) })
	eventually(t, func() bool { return !processAlive(shim) })
}
