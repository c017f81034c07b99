package e2e

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tend-dev/tend/agent/status"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/drift"
	"github.com/tend-dev/tend/planner"
)

// statusAgent serves the status of an agent that saw drift while suspended,
// from a real status.Server in the test process, and returns its address.
func statusAgent(t *testing.T) (string, *status.Tracker) {
	t.Helper()
	tr := status.NewTracker("cam-017", "v1.2.3")
	tr.SetApplied("main@sha1:aaa", "commit:aaa")
	started := time.Now().Add(-time.Minute)
	plan := &planner.Changeset{Device: "cam-017", Revision: "main@sha1:aaa", Unchanged: 2, Actions: []planner.Action{
		{Type: planner.Update, Resource: "file/etc/infer/config.yaml", Kind: planner.KindFile, Reason: "drift: content changed on node", Drift: "content changed on node"},
	}}
	tr.Observe(&status.Tick{Revision: "main@sha1:aaa", Target: "main@sha1:aaa", Fetch: status.FetchUnchanged, Plan: plan,
		Drift: drift.Detect(plan, started), Started: started, Duration: time.Second}, nil, "tend suspend")
	s := status.NewServer("127.0.0.1:0", tr, status.NewMetrics(), func() bool { return true }, func() bool { return true }, nil)
	addr, err := s.Start(t.Context())
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return addr.String(), tr
}

func TestStatusCommand(t *testing.T) {
	addr, tr := statusAgent(t)

	t.Run("text for people", func(t *testing.T) {
		stdout, stderr, code := tend(t, "status", "--listen", addr)
		require.Equal(t, 0, code, stderr)
		for _, want := range []string{
			"Device:           cam-017\n",
			"Applied revision: main@sha1:aaa\n",
			"Result:           suspended (1 change pending, not applied)\n",
			"Suspended:        yes",
			"Resources not ok:\n  drifted  file/etc/infer/config.yaml  drift: content changed on node\n",
			"file/etc/infer/config.yaml  content changed on node  not reverted\n",
			"0 resources ok, 1 not ok.\n",
		} {
			require.Contains(t, stdout, want)
		}
		require.Regexp(t, `Last reconcile:   \S+Z \(\S+ ago\)\n`, stdout)
		require.NotContains(t, stdout, "Last error")
	})

	t.Run("json as received", func(t *testing.T) {
		stdout, stderr, code := tend(t, "status", "--listen", addr, "--format", "json")
		require.Equal(t, 0, code, stderr)
		var got status.Status
		require.NoError(t, json.Unmarshal([]byte(stdout), &got))
		want := tr.Status()
		// Times went through RFC 3339 and back.
		for i := range want.Drift {
			require.True(t, want.Drift[i].Time.Equal(got.Drift[i].Time))
			got.Drift[i].Time = want.Drift[i].Time
		}
		require.Equal(t, want, got)
	})

	t.Run("listen from the agent config", func(t *testing.T) {
		dir := t.TempDir()
		config := filepath.Join(dir, "agent.yaml")
		require.NoError(t, os.WriteFile(config, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\ndevice: cam-017\n"+
			"source: {url: "+filepath.Join(dir, "fleet")+"}\nlisten: "+addr+"\n"), 0o644))
		stdout, stderr, code := tend(t, "status", "--config", config)
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, "Device:           cam-017\n")
	})

	t.Run("bad format", func(t *testing.T) {
		_, stderr, code := tend(t, "status", "--listen", addr, "--format", "yaml")
		require.Equal(t, 1, code)
		require.Equal(t, "Error: --format \"yaml\": use text or json\n", stderr)
	})
}

func TestStatusCommandWithoutAgent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	state := t.TempDir()
	stdout, stderr, code := tend(t, "status", "--listen", addr, "--state-dir", state)
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Equal(t, "Error: no tend agent answers on "+addr+" (GET /status: connection refused), and neither an agent nor tend apply has written a status in "+
		state+": is the agent running, with this stateDir?\n", stderr)
}
