package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/render"
)

const renderLong = "render fetches this device's manifests, merges them and resolves every model ref as the agent would:\n" +
	"a tag or semver policy to the digest this device would pull. When the registry cannot be asked, a\n" +
	"model whose ref did not change keeps the digest applied last (printed as offline, with a warning);\n" +
	"a new ref is printed as held, with the reason, and the command exits 1. The node is not observed\n" +
	"or changed; the model manifests read are kept in stateDir's blob store, as the agent keeps them."

// renderCmd is tend render and its flags.
type renderCmd struct {
	g       *globals
	format  string
	explain bool
}

func newRenderCommand(g *globals) *cobra.Command {
	r := &renderCmd{g: g}
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print the desired state of this device, merged from all its manifests, models resolved",
		Long:  renderLong,
		Args:  cobra.NoArgs,
		RunE:  r.run,
	}
	g.addFlags(cmd, logFlags, []string{"device"}, sourceFlags, nodeFlags)
	cmd.Flags().StringVar(&r.format, "format", "yaml", "output format: yaml or json")
	cmd.Flags().BoolVar(&r.explain, "explain", false, "print where each label, resource and variable came from: the layer (profile or Device document, file:line) and the layers it overrode; "+
		"reads the fleet repo alone (no root, no stateDir, nothing resolved)")
	return cmd
}

func (r *renderCmd) run(cmd *cobra.Command, _ []string) error {
	if err := oneOf("--format", r.format, "yaml", "json"); err != nil {
		return err
	}
	if r.explain && cmd.Flags().Changed("format") {
		return fmt.Errorf("--explain prints text for people; drop --format")
	}
	c, log, err := r.g.setup(cmd)
	if err != nil {
		return err
	}
	if r.explain {
		return r.writeExplain(cmd, c, log)
	}
	res, err := r.g.reconciler(c, log).Render(cmd.Context())
	if res.Desired == nil {
		return err
	}
	for _, w := range res.Composed.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %v\n", w)
	}
	if werr := writeDocument(cmd.OutOrStdout(), r.format, c.Device, res.Snapshot.Revision.String(), res.Desired.Document()); werr != nil {
		return werr
	}
	warnOffline(cmd.ErrOrStderr(), res)
	return err // a held model is printed, and still fails
}

// writeExplain prints which layer set what: that needs the fleet repo
// alone (no root, no stateDir, no registry).
func (r *renderCmd) writeExplain(cmd *cobra.Command, c *manifest.AgentConfig, log *slog.Logger) error {
	_, comp, err := r.g.reconciler(c, log).Compose(cmd.Context(), len(c.AllowPaths) > 0)
	if err != nil {
		return err
	}
	for _, w := range comp.Warnings {
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: %v\n", w)
	}
	return comp.WriteExplain(cmd.OutOrStdout())
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
