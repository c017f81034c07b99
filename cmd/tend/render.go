package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/tend-dev/tend/render"
)

func newRenderCommand(g *globals) *cobra.Command {
	var format string
	var explain bool
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print the desired state of this device, merged from all its manifests, models resolved",
		Long: "render fetches this device's manifests, merges them and resolves every model ref as the agent would:\n" +
			"a tag or semver policy to the digest this device would pull. When the registry cannot be asked, a\n" +
			"model whose ref did not change keeps the digest applied last (printed as offline, with a warning);\n" +
			"a new ref is printed as held, with the reason, and the command exits 1. The node is not observed\n" +
			"or changed; the model manifests read are kept in stateDir's blob store, as the agent keeps them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := oneOf("--format", format, "yaml", "json"); err != nil {
				return err
			}
			if explain && cmd.Flags().Changed("format") {
				return fmt.Errorf("--explain prints text for people; drop --format")
			}
			c, log, err := g.setup(cmd)
			if err != nil {
				return err
			}
			if explain {
				// Which layer set what needs the fleet repo alone: no
				// root, no stateDir, no registry.
				_, comp, err := g.reconciler(c, log).Compose(cmd.Context(), len(c.AllowPaths) > 0)
				if err != nil {
					return err
				}
				for _, w := range comp.Warnings {
					fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %v\n", w)
				}
				return comp.WriteExplain(cmd.OutOrStdout())
			}
			res, err := g.reconciler(c, log).Render(cmd.Context())
			if res.Desired == nil {
				return err
			}
			for _, w := range res.Composed.Warnings {
				fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %v\n", w)
			}
			if werr := writeDocument(cmd.OutOrStdout(), format, c.Device, res.Snapshot.Revision.String(), res.Desired.Document()); werr != nil {
				return werr
			}
			warnOffline(cmd.ErrOrStderr(), res)
			return err // a held model is printed, and still fails
		},
	}
	g.addFlags(cmd, logFlags, []string{"device"}, sourceFlags, nodeFlags)
	cmd.Flags().StringVar(&format, "format", "yaml", "output format: yaml or json")
	cmd.Flags().BoolVar(&explain, "explain", false, "print where each label, resource and variable came from: the layer (profile or Device document, file:line) and the layers it overrode; "+
		"reads the fleet repo alone (no root, no stateDir, nothing resolved)")
	return cmd
}

// writeDocument prints a rendered state as YAML (with a comment naming the
// device and revision) or JSON.
func writeDocument(out io.Writer, format, device, revision string, doc render.Document) error {
	if format == "json" {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "# device %s at %s\n%s", device, revision, b)
	return err
}
