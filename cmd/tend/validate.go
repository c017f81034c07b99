package main

import (
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	"github.com/tend-dev/tend/agent"
	"github.com/tend-dev/tend/manifest"
)

func newValidateCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "validate [FILE|DIR...]",
		Short: "Check manifests: this device's from the fleet repo, or the given files for every device they declare",
		Long: "Without arguments, validate fetches this device's manifests from the fleet repo and checks them.\n" +
			"With files or folders, it checks every Device document in them, grouped by metadata.name,\n" +
			"without fetching anything (useful before a commit).",
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if len(args) > 0 {
				opts := manifest.ValidateOptions{AllowPaths: g.allowPaths, CheckAllowPaths: len(g.allowPaths) > 0}
				// A config is optional here (CI has none), but one that was
				// asked for must load.
				c, err := g.loadConfig()
				if err != nil && g.flags.Changed("config") {
					return err
				}
				if err == nil && len(c.AllowPaths) > 0 {
					opts = manifest.ValidateOptions{AllowPaths: c.AllowPaths, CheckAllowPaths: true}
				}
				devices, err := agent.ValidateFiles(args, opts)
				if err != nil {
					return err
				}
				names := make([]string, 0, len(devices))
				for n := range devices {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					fmt.Fprintf(out, "valid: device %s: %s\n", n, agent.Count(devices[n]))
				}
				return nil
			}
			c, log, err := g.setup(cmd)
			if err != nil {
				return err
			}
			snap, dev, err := g.reconciler(c, log).Desired(cmd.Context(), true)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "valid: device %s at %s: %s\n", c.Device, agent.Revision(snap), agent.Count(dev))
			return nil
		},
	}
}
