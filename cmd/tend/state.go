package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/agent"
	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/statedir"
)

func newStateCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "The format of this node's stateDir",
		Args:  cobra.NoArgs,
	}
	restore := &cobra.Command{
		Use:   "restore",
		Short: "Put back the files an upgrade migrated, for the older tend to run on this stateDir again",
		Long: "restore puts back the copy of the stateDir's files, as they were, that this tend kept when it migrated\n" +
			"them to its format (stateDir/format-N), and removes what it wrote since in its format alone: the older tend\n" +
			"of format N can run on the stateDir again. The copy is kept until the first apply that succeeds after the\n" +
			"migration; then there is none. The whole copy is checked first: one holding anything but folders and regular\n" +
			"files (a symlink, a fifo, a device) is refused, naming it, and nothing changes. Stop the agent first; install\n" +
			"the older tend after.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.nodeConfig()
			if err != nil {
				return err
			}
			from, removed, err := restoreState(cmd.Context(), c.StateDir, g.lockTimeout)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, f := range removed {
				fmt.Fprintf(out, "removed %s (written in format %d since the migration)\n", f, statedir.Format)
			}
			fmt.Fprintf(out, "Restored: %s is in state format %d again, as the tend of that format left it; install that tend before the agent starts.\n", c.StateDir, from)
			return nil
		},
	}
	g.addFlags(restore, logFlags, []string{"state-dir", "lock-timeout"})
	cmd.AddCommand(nodeOnly(restore)...)
	return cmd
}

// restoreState puts back the newest copy a migration kept in stateDir
// (statedir.Dir.RestoreFormatCopy), under the agent lock (no agent runs)
// and the stateDir lock, and returns its format and the files removed.
func restoreState(ctx context.Context, stateDir string, lockTimeout time.Duration) (int, []string, error) {
	d := statedir.Dir(stateDir)
	n, _, err := d.ReadMarker()
	if err != nil {
		return 0, nil, err
	}
	from := 0
	for f := statedir.Format - 1; f >= 1; f-- {
		if _, err := os.Stat(d.FormatCopy(f)); err == nil {
			from = f
			break
		}
	}
	if from == 0 { // a copy is there after a migration that a crash cut short too
		return 0, nil, fmt.Errorf("%s holds no copy to restore (it is in state format %d): a copy is kept from a migration until the first apply "+
			"that succeeds after it; a tend of an older format cannot run on this stateDir: keep this tend, or give the older one a new stateDir", stateDir, n)
	}
	unlockAgent, err := applier.LockAgent(stateDir)
	if locked := (*applier.LockedError)(nil); errors.As(err, &locked) {
		return 0, nil, fmt.Errorf("an agent runs on %s (pid %d): stop it first (systemctl stop tend), then restore", stateDir, locked.PID)
	} else if err != nil {
		return 0, nil, err
	}
	defer unlockAgent()
	if lockTimeout <= 0 {
		lockTimeout = agent.DefaultLockTimeout
	}
	lockCtx, cancel := context.WithTimeout(ctx, lockTimeout)
	defer cancel()
	unlock, err := applier.Lock(lockCtx, stateDir)
	if err != nil {
		return 0, nil, err
	}
	defer unlock()
	removed, err := d.RestoreFormatCopy(from)
	return from, removed, err
}
