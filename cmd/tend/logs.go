package main

import (
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/agent"
	"github.com/tend-dev/tend/applier/service"
)

func newLogsCommand(g *globals) *cobra.Command {
	var (
		follow, previous bool
		replica          int
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
			c, err := g.nodeConfig()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			rts := agent.Runtimes(c, nil)
			defer rts.Close()
			return service.Logs(ctx, cmd.OutOrStdout(), rts, c.StateDir, name, replica, service.LogOptions{Follow: follow, Previous: previous})
		},
	}
	g.addFlags(cmd, logFlags, []string{"state-dir"})
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing what the service writes")
	cmd.Flags().BoolVarP(&previous, "previous", "p", false, "print the last instance that exited (the one before the instance that runs)")
	replica = -1
	cmd.Flags().Var((*replicaFlag)(&replica), "replica", "only this replica, by its index (default: all)")
	return cmd
}

// replicaFlag is --replica: an index, or -1 (all, also when not given), which
// help shows as no default.
type replicaFlag int

func (r *replicaFlag) String() string {
	if *r < 0 {
		return ""
	}
	return strconv.Itoa(int(*r))
}

func (r *replicaFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < -1 {
		return fmt.Errorf("%q is not a replica index: use 0, 1, …", s)
	}
	*r = replicaFlag(n)
	return nil
}

func (r *replicaFlag) Type() string { return "int" }
