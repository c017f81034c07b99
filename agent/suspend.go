package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
)

type suspension struct {
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// Suspended reports whether applies are suspended on this node, by the
// config (suspend: true) or by `tend suspend`, and why.
func Suspended(c *manifest.AgentConfig) (bool, string) {
	if c.Suspend {
		return true, "suspend: true in the agent config"
	}
	data, err := os.ReadFile(statedir.Dir(c.StateDir).Suspended())
	if err != nil {
		return false, ""
	}
	var s suspension
	_ = statedir.Decode(statedir.Dir(c.StateDir).Suspended(), data, &s) // present is suspended, whatever it holds
	why := "tend suspend"
	if !s.At.IsZero() {
		why += " at " + s.At.UTC().Format(time.RFC3339)
	}
	if s.Reason != "" {
		why += ": " + s.Reason
	}
	return true, why
}

// Suspend stops applies on the node until Resume: drift is still observed
// and reported.
func Suspend(stateDir, reason string) error {
	if err := statedir.WriteJSON(stateDir, statedir.SuspendFile, suspension{At: time.Now().UTC(), Reason: reason}, 0o644); err != nil {
		return fmt.Errorf("suspend: %w", err)
	}
	return nil
}

// Resume lets applies run again. It reports whether the node was
// suspended by `tend suspend`.
func Resume(stateDir string) (bool, error) {
	err := os.Remove(statedir.Dir(stateDir).Suspended())
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}
