package main

import (
	"github.com/spf13/cobra"
	"github.com/tend-dev/tend/agent"
)

func newAgentCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "agent",
		Short: "Run the daemon: reconcile on the schedule, forever",
		Long: "agent reconciles at start and then on every tick of the schedule (plus a random jitter),\n" +
			"logging one summary line per tick. SIGINT or SIGTERM stops it after the current step;\n" +
			"services it started keep running.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, log, err := g.setup(cmd)
			if err != nil {
				return err
			}
			sched, err := agent.ParseSchedule(c.Schedule)
			if err != nil {
				return err
			}
			loop := &agent.Loop{Reconciler: g.reconciler(c, log), Schedule: sched, Jitter: c.Jitter.D(), Version: version}
			return loop.Run(cmd.Context())
		},
	}
}
