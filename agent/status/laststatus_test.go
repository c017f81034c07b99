package status

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
)

// Past statusRefresh the file is written even when only its times changed,
// so the time it was written says how recent it is.
func TestLastStatusIsRefreshed(t *testing.T) {
	c := &manifest.AgentConfig{Device: "cam-017", StateDir: t.TempDir()}
	var w LastWriter
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	s := Status{Device: "cam-017", LastReconcile: now.Format(time.RFC3339)}
	w.Write(slog.New(slog.DiscardHandler), c, s, now)
	require.Equal(t, now, w.written)
	s.LastReconcile = now.Add(time.Minute).Format(time.RFC3339)
	w.Write(slog.New(slog.DiscardHandler), c, s, now.Add(time.Minute))
	require.Equal(t, now, w.written, "only the time changed")
	w.Write(slog.New(slog.DiscardHandler), c, s, now.Add(statusRefresh))
	require.Equal(t, now.Add(statusRefresh), w.written)
}
