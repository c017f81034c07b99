package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// make demo's script, with its output not on a terminal: no escape
// sequences, and when it returns, the service and the registry it started
// have exited.
func TestDemoStopsWhatItStarted(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	sandbox := filepath.Join(t.TempDir(), "demo")
	demo := exec.Command("bash", "../../../examples/demo.sh")
	demo.Env = append(os.Environ(), "TEND="+tendBin, "DEMO_DIR="+sandbox)
	out, err := demo.CombinedOutput()
	require.NoError(t, err, string(out))
	require.NotContains(t, string(out), "\033", "escape sequences written to a pipe")
	require.Contains(t, string(out), "demo complete")

	var rec struct {
		Proc struct {
			PID int `json:"pid"`
		} `json:"proc"`
	}
	b, err := os.ReadFile(filepath.Join(sandbox, "state/services/infer/0.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rec))
	require.NotZero(t, rec.Proc.PID)
	require.True(t, exited(rec.Proc.PID), "the demo service %d still runs", rec.Proc.PID)
	host, err := os.ReadFile(filepath.Join(sandbox, "registry"))
	require.NoError(t, err)
	_, err = net.Dial("tcp", strings.TrimSpace(string(host)))
	require.Error(t, err, "the demo registry still answers")
}

// exited reports whether pid is gone, or a zombie not yet reaped.
func exited(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return strings.HasPrefix(rest, "Z")
}
