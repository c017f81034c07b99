package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/robfig/cron/v3"
	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/agent"
)

func newAgentCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the daemon: reconcile on the schedule, forever",
		Long: "agent reconciles at start and then on every tick of the schedule (plus a random jitter),\n" +
			"logging one summary line per tick. SIGINT or SIGTERM stops it after the current step;\n" +
			"services it started keep running. SIGHUP or POST /reconcile runs a tick now.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, log, err := g.setup(cmd)
			if err != nil {
				return err
			}
			sched, err := parseSchedule(c.Schedule)
			if err != nil {
				return err
			}
			listen := c.Listen
			if listen == "off" {
				listen = "" // no status server
			}
			loop := agent.NewLoop(g.reconciler(c, log), agent.LoopOptions{Schedule: sched, Jitter: c.Jitter.D(), Version: thisBuild().Version, Listen: listen})
			// SIGHUP asks for a reconcile now, as POST /reconcile does.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			go func() {
				for range hup {
					loop.Trigger()
				}
			}()
			return loop.Run(cmd.Context())
		},
	}
	g.addFlags(cmd, logFlags, []string{"device"}, sourceFlags, nodeFlags,
		[]string{"allow-empty", "keep-versions", "max-rate", "schedule", "jitter", "listen"})
	return cmd
}

// parseSchedule parses a robfig/cron spec ("@every 30s", "*/5 * * * *").
func parseSchedule(spec string) (cron.Schedule, error) {
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, fmt.Errorf("invalid schedule %q: %w", spec, err)
	}
	return s, nil
}
