package main

import (
	"fmt"

	"github.com/spf13/cobra"

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
			from, removed, err := applier.RestoreState(cmd.Context(), c.StateDir, g.stateOptions())
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
