package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/planner"
)

// planCmd is tend plan and its flags.
type planCmd struct {
	g                  *globals
	format             string
	detailed, showDiff bool
}

func newPlanCommand(g *globals) *cobra.Command {
	p := &planCmd{g: g}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show what apply would change on this node, and change nothing",
		Long: "plan fetches this device's manifests, observes the node and prints the actions that apply would take.\n" +
			"With --detailed-exitcode it exits 0 when there is nothing to do, 2 when there are changes and 1 on error.",
		Args: cobra.NoArgs,
		RunE: p.run,
	}
	g.addFlags(cmd, logFlags, []string{"device"}, sourceFlags, nodeFlags, []string{"allow-empty"})
	cmd.Flags().StringVar(&p.format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVar(&p.showDiff, "diff", false, "show what each update changes: a unified diff of file content (node against declaration), old and new spec fields")
	cmd.Flags().BoolVar(&p.detailed, "detailed-exitcode", false, "exit 2 when the plan has changes, 0 when it has none, 1 on error")
	return cmd
}

func (p *planCmd) run(cmd *cobra.Command, _ []string) error {
	if err := oneOf("--format", p.format, "text", "json"); err != nil {
		return err
	}
	c, log, err := p.g.setup(cmd)
	if err != nil {
		return err
	}
	r := p.g.reconciler(c, log)
	r.Diff = p.showDiff
	res, err := r.Plan(cmd.Context())
	if res == nil || res.Plan == nil {
		return err
	}
	warnOffline(cmd.ErrOrStderr(), res)
	// A plan made while the node is held (the repo or a registry
	// unreachable) is printed, and the failure still exits 1.
	if werr := writePlan(cmd.OutOrStdout(), p.format, res.Plan); werr != nil || err != nil {
		return errors.Join(werr, err)
	}
	if p.detailed && !res.Plan.Empty() {
		return exitError{code: 2}
	}
	return nil
}

func writePlan(w io.Writer, format string, cs *planner.Changeset) error {
	switch format {
	case "text":
		return planner.WriteText(w, cs)
	case "json":
		return planner.WriteJSON(w, cs)
	}
	return fmt.Errorf("--format %q: use text or json", format)
}
