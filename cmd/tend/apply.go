package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/agent"
)

func newApplyCommand(g *globals) *cobra.Command {
	var format string
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
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}
