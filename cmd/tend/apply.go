package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/agent"
	"github.com/tend-dev/tend/manifest"
)

func newApplyCommand(g *globals) *cobra.Command {
	var format string
	var force bool
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Reconcile this node once, now",
		Long:  "apply fetches, plans and applies once, prints the plan it applied, and exits 0 when the node has converged.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := oneOf("--format", format, "text", "json"); err != nil {
				return err
			}
			c, log, err := g.setup(cmd)
			if err != nil {
				return err
			}
			if suspended, why := agent.Suspended(c); suspended && !force {
				return suspendedError(c, why)
			}
			res, err := g.reconciler(c, log).Apply(cmd.Context())
			if res.Plan != nil {
				if werr := writePlan(cmd.OutOrStdout(), format, res.Plan); werr != nil {
					return werr
				}
			}
			if err != nil {
				return err
			}
			if format == "text" {
				fmt.Fprintf(cmd.OutOrStdout(), "Apply complete: %d actions applied at %s.\n", len(res.Applied), agent.Revision(res.Snapshot))
			}
			return nil
		},
	}
	g.addFlags(cmd, logFlags, []string{"device"}, sourceFlags, nodeFlags, []string{"allow-empty", "keep-versions"})
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVar(&force, "force", false, "apply even though the node is suspended, this once")
	return cmd
}

// suspendedError says why apply refuses on a suspended node and how to go
// on.
func suspendedError(c *manifest.AgentConfig, why string) error {
	undo := "run `tend resume` to apply again"
	if c.Suspend {
		undo = "set suspend: false in the agent config to apply again"
	}
	return fmt.Errorf("device %s is suspended (%s): nothing is applied; %s, or `tend apply --force` to apply this once", c.Device, why, undo)
}
