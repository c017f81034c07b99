package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/tend-dev/tend/agent"
	"sigs.k8s.io/yaml"
)

func newRenderCommand(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print the desired state of this device, merged from all its manifests",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := oneOf("--format", format, "yaml", "json"); err != nil {
				return err
			}
			c, log, err := g.setup(cmd)
			if err != nil {
				return err
			}
			snap, dev, err := g.reconciler(c, log).Desired(cmd.Context(), false)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch format {
			case "yaml":
				b, err := yaml.Marshal(dev)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "# device %s at %s\n%s", c.Device, agent.Revision(snap), b)
			case "json":
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(dev)
			default:
				return fmt.Errorf("--format %q: use yaml or json", format)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "yaml", "output format: yaml or json")
	return cmd
}
