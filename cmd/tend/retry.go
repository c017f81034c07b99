package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/agent"
	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/statedir"
)

func newRetryCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retry [COMMIT]",
		Short: "Try again a commit this node rolled back, without a new commit",
		Long: "A commit whose apply was rolled back on this node (a service did not become healthy) is\n" +
			"quarantined: the node holds its last applied commit and does not apply that one again.\n" +
			"retry forgets the quarantine of COMMIT (a full or abbreviated hash), or of every quarantined\n" +
			"commit when none is given, so the next tick or tend apply tries it again, and asks a running\n" +
			"agent to reconcile now.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.nodeConfig()
			if err != nil {
				return err
			}
			commit := ""
			if len(args) == 1 {
				commit = args[0]
			}
			cleared, err := retry(cmd.Context(), c.StateDir, commit, g.lockTimeout)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(cleared) == 0 {
				fmt.Fprintln(out, "No commit is quarantined on this node.")
				return nil
			}
			for _, q := range cleared {
				fmt.Fprintf(out, "Retrying %s (rolled back at %s: %s).\n", q.Revision, q.At.UTC().Format(time.RFC3339), q.Reason)
			}
			if poke(c.Listen) {
				fmt.Fprintln(out, "The agent reconciles now.")
			} else {
				fmt.Fprintln(out, "The next tick or tend apply tries it again.")
			}
			return nil
		},
	}
	g.addFlags(cmd, logFlags, []string{"state-dir", "listen", "lock-timeout"})
	return cmd
}

// retry forgets the quarantine of commit (a full or abbreviated hash), or
// of every quarantined commit when it is "", so that the next reconcile
// applies it again, and returns what it forgot. It waits for the stateDir
// lock at most lockTimeout (zero: agent.DefaultLockTimeout). A stateDir
// without a quarantine is left as it is.
func retry(ctx context.Context, stateDir, commit string, lockTimeout time.Duration) ([]applier.Quarantined, error) {
	if _, err := os.Stat(statedir.Dir(stateDir).Quarantine()); err != nil {
		return applier.Unquarantine(stateDir, commit) // nothing to change: no lock, no stateDir made
	}
	if lockTimeout <= 0 {
		lockTimeout = agent.DefaultLockTimeout
	}
	lockCtx, cancel := context.WithTimeout(ctx, lockTimeout)
	defer cancel()
	unlock, err := applier.Lock(lockCtx, stateDir)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err() // interrupted, not a second tend
	}
	if err != nil {
		return nil, err
	}
	defer unlock()
	return applier.Unquarantine(stateDir, commit)
}
