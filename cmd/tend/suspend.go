package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/agent"
)

func newSuspendCommand(g *globals) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "suspend",
		Short: "Stop applying changes on this node; drift is still observed and reported",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.nodeConfig()
			if err != nil {
				return err
			}
			if err := agent.Suspend(c.StateDir, reason); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Suspended: the agent plans and reports but applies nothing until `tend resume`.\n")
			poke(c.Listen) // so status says so now
			return nil
		},
	}
	g.addFlags(cmd, logFlags, []string{"state-dir", "listen"})
	cmd.Flags().StringVar(&reason, "reason", "", "why, shown in status and logs")
	return cmd
}

func newResumeCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Apply changes again after tend suspend, starting with a reconcile now",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.nodeConfig()
			if err != nil {
				return err
			}
			was, err := agent.Resume(c.StateDir)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case c.Suspend:
				fmt.Fprintln(out, "Still suspended: the agent config says suspend: true.")
				return nil
			case !was:
				fmt.Fprintln(out, "Not suspended.")
				return nil
			}
			fmt.Fprintln(out, "Resumed.")
			if poke(c.Listen) {
				fmt.Fprintln(out, "The agent reconciles now.")
			}
			return nil
		},
	}
	g.addFlags(cmd, logFlags, []string{"state-dir", "listen"})
	return cmd
}

// poke asks a running agent on listen for a reconcile now (best effort;
// never through a proxy) and reports whether it accepted.
func poke(listen string) bool {
	if listen == "" || listen == "off" {
		return false
	}
	client := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Post("http://"+listen+"/reconcile", "", nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusAccepted
}
