package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/tend-dev/tend/agent"
	"github.com/tend-dev/tend/render"
)

func newRenderCommand(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print the desired state of this device, merged from all its manifests, models resolved",
		Long: "render fetches this device's manifests, merges them and resolves every model ref in its registry\n" +
			"(a tag or semver policy to the digest this device would pull), without looking at the node.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := oneOf("--format", format, "yaml", "json"); err != nil {
				return err
			}
			c, log, err := g.setup(cmd)
			if err != nil {
				return err
			}
			resolver := &render.Registry{Options: agent.RegistryOptions(c)}
			snap, d, err := g.reconciler(c, log).Render(cmd.Context(), resolver)
			if err != nil {
				return err
			}
			doc := d.Document()
			out := cmd.OutOrStdout()
			if format == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(doc)
			}
			b, err := yaml.Marshal(doc)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "# device %s at %s\n%s", c.Device, agent.Revision(snap), b)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "yaml", "output format: yaml or json")
	return cmd
}
