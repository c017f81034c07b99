package applier

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// AgentRunning sees the agent lock held, names its holder, and leaves
// the lock to the agent that takes it next.
func TestAgentRunning(t *testing.T) {
	stateDir := filepath.Join(t.TempDir(), "state")
	pid, running, err := AgentRunning(stateDir)
	require.NoError(t, err)
	require.False(t, running, "no stateDir, no agent")
	require.Zero(t, pid)
	_, err = os.Stat(stateDir)
	require.ErrorIs(t, err, os.ErrNotExist, "looking creates nothing")

	unlock, err := LockAgent(stateDir)
	require.NoError(t, err)
	pid, running, err = AgentRunning(stateDir)
	require.NoError(t, err)
	require.True(t, running)
	require.Equal(t, os.Getpid(), pid)

	require.NoError(t, unlock())
	_, running, err = AgentRunning(stateDir)
	require.NoError(t, err)
	require.False(t, running, "the agent stopped")
	unlock, err = LockAgent(stateDir)
	require.NoError(t, err, "looking let go of the lock")
	require.NoError(t, unlock())
}
