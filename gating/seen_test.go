package gating

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
)

// A first sight recorded in the future (a clock set back at boot) does
// not hold a release until then: the release counts from now.
func TestFirstSeenInTheFutureCountsFromNow(t *testing.T) {
	tk := &tick{Input: Input{Config: &manifest.AgentConfig{StateDir: t.TempDir()}}}
	now := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	future := now.Add(30 * 24 * time.Hour)
	require.NoError(t, statedir.WriteJSON(tk.Config.StateDir, statedir.ReleasesFile, releases{"k": future}, 0o600))
	seen, err := tk.firstSeen("k", now, true)
	require.NoError(t, err)
	require.Equal(t, now, seen)
	seen, err = tk.firstSeen("k", now.Add(time.Hour), true)
	require.NoError(t, err)
	require.Equal(t, now, seen, "recorded anew at the first look")
}
