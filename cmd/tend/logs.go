package main

import (
	"fmt"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/applier/service"
)

func newLogsCommand(g *globals) *cobra.Command {
	var (
		follow  bool
		replica int
	)
	cmd := &cobra.Command{
		Use:   "logs service/NAME",
		Short: "Print the output of a service's replicas",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, ok := strings.CutPrefix(args[0], "service/")
			if !ok || name == "" {
				return fmt.Errorf("%q is not a service: use service/NAME", args[0])
			}
			c, _, err := g.setup(cmd)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return service.WriteLogs(ctx, cmd.OutOrStdout(), c.StateDir, name, replica, follow)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing what the service writes")
	cmd.Flags().IntVar(&replica, "replica", -1, "only this replica (default: all)")
	return cmd
}
