package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/agent"
	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

const applyLong = "apply fetches, plans and applies once, prints the plan it applied, and exits 0 when the node has converged.\n" +
	"It writes its status to stateDir for tend status, unless an agent runs on the stateDir (whose status stays its\n" +
	"own); it warns when that agent follows another ref, whose next tick reverts what apply did.\n" +
	"Actions that will fail or are held (a model whose registry is unreachable, and what uses it) are left out;\n" +
	"the rest is applied, and apply says what was not and exits 1.\n" +
	"With --stage-only it downloads the models of the target into the store and activates nothing (also on a\n" +
	"suspended node): the next apply of that target downloads nothing for them."

// applyCmd is tend apply and its flags.
type applyCmd struct {
	g                *globals
	format           string
	force, stageOnly bool
}

func newApplyCommand(g *globals) *cobra.Command {
	a := &applyCmd{g: g}
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Reconcile this node once, now",
		Long:  applyLong,
		Args:  cobra.NoArgs,
		RunE:  a.run,
	}
	g.addFlags(cmd, logFlags, []string{"device"}, sourceFlags, nodeFlags, []string{"allow-empty", "keep-versions", "max-rate"})
	cmd.Flags().StringVar(&a.format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVar(&a.force, "force", false, "apply even though the node is suspended, this once")
	cmd.Flags().BoolVar(&a.stageOnly, "stage-only", false, "download the target's models into the store and activate nothing")
	return cmd
}

func (a *applyCmd) run(cmd *cobra.Command, _ []string) error {
	if err := oneOf("--format", a.format, "text", "json"); err != nil {
		return err
	}
	if a.stageOnly && a.format != "text" {
		return errors.New("--stage-only prints text; --format json is not supported with it")
	}
	deferGC()
	c, log, err := a.g.setup(cmd)
	if err != nil {
		return err
	}
	if a.stageOnly {
		return stageOnlyRun(cmd, a.g.reconciler(c, log))
	}
	if suspended, why := agent.Suspended(c); suspended && !a.force {
		return suspendedError(c, why)
	}
	res, err := a.g.reconciler(c, log).ApplyOnce(cmd.Context(), version)
	warnAgent(cmd.ErrOrStderr(), res)
	if res.Plan == nil {
		return err
	}
	warnOffline(cmd.ErrOrStderr(), res)
	return a.write(cmd.OutOrStdout(), res, err)
}

// write prints the plan applied, and what apply left out, in the format
// asked for; err is the apply's.
func (a *applyCmd) write(w io.Writer, res *agent.Result, err error) error {
	if a.format == "json" {
		return errors.Join(planner.WriteApplyJSON(w, res.Plan, res.Applied, err), err)
	}
	if werr := planner.WriteText(w, res.Plan); werr != nil {
		return werr
	}
	if len(res.Skipped) > 0 {
		writeSkipped(w, res)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Apply complete: %s applied at %s.\n", planner.Count(len(res.Applied), "action"), res.Snapshot.Revision.String())
	return nil
}

// stageOnlyRun stages the target's models (agent.Reconciler.StageOnly)
// and says what it downloaded, one line a model and a summary.
func stageOnlyRun(cmd *cobra.Command, r *agent.Reconciler) error {
	res, err := r.StageOnly(cmd.Context())
	if res.Desired == nil {
		return err
	}
	warnOffline(cmd.ErrOrStderr(), res)
	w := cmd.OutOrStdout()
	for _, m := range res.Staged {
		fmt.Fprintf(w, "Staged %s: %s → %s (%s downloaded).\n", m.ID, m.Ref, planner.ShortDigest(m.Digest), printable.HumanBytes(m.Bytes))
	}
	if err != nil {
		return err
	}
	rev := res.Snapshot.Revision.String()
	if len(res.Staged) == 0 {
		fmt.Fprintf(w, "Stage complete: nothing to download at %s; nothing activated.\n", rev)
		return nil
	}
	fmt.Fprintf(w, "Stage complete: %s staged (%s downloaded) at %s; nothing activated.\n",
		planner.Count(len(res.Staged), "model"), printable.HumanBytes(res.Downloaded), rev)
	return nil
}

// writeSkipped writes the line of an apply that left actions out: how many
// of the plan's were applied, and which were held or will fail.
func writeSkipped(w io.Writer, res *agent.Result) {
	var held, failing []string
	for _, a := range res.Skipped {
		if a.Error != "" {
			failing = append(failing, a.Resource)
		} else {
			held = append(held, a.Resource)
		}
	}
	line := fmt.Sprintf("Apply: %d of %s applied at %s", len(res.Applied), planner.Count(len(res.Plan.Actions), "action"), res.Snapshot.Revision.String())
	if len(held) > 0 {
		line += "; held: " + strings.Join(held, ", ")
	}
	if len(failing) > 0 {
		line += "; will fail: " + strings.Join(failing, ", ")
	}
	fmt.Fprintln(w, line+".")
}

// warnAgent says on stderr when an agent runs on the stateDir and follows
// another ref than the one applied: its next tick reverts the apply.
func warnAgent(w io.Writer, res *agent.Result) {
	if res.Agent == nil || res.Snapshot == nil {
		return
	}
	if msg := res.Agent.Reverts(res.Snapshot.Revision); msg != "" {
		fmt.Fprintf(w, "Warning: %s\n", msg)
	}
}

// warnOffline says on stderr when models were kept at their applied
// version because their registry could not be asked, when a policy passed
// over a version (rolled back here, or not signed), when a running
// version no longer verifies, and when the device's rollout held a
// release.
func warnOffline(w io.Writer, res *agent.Result) {
	if off := res.Offline(); off != nil {
		fmt.Fprintf(w, "Warning: %v\n", off)
	}
	if q := res.Quarantined(); q != nil {
		fmt.Fprintf(w, "Warning: %v\n", q)
	}
	if u := res.Unverified(); u != nil {
		fmt.Fprintf(w, "Warning: %v\n", u)
	}
	if a := res.ActiveUnverified(); a != nil {
		fmt.Fprintf(w, "Warning: %v\n", a)
	}
	if h := res.Held; h != nil {
		kept := res.Snapshot.Revision.String()
		if h.Revision == kept {
			// The commit is the applied one: the release is a model
			// digest newly resolved by its tag or semver policy.
			fmt.Fprintf(w, "Release of %s at %s %s; the plan keeps the applied digests and reverts drift only\n", strings.Join(h.Resources, ", "), h.Revision, h.Reason)
			return
		}
		fmt.Fprintf(w, "Release %s %s; the plan keeps %s and reverts drift only\n", h.Revision, h.Reason, kept)
	}
}

// suspendedError says why apply refuses on a suspended node and how to go
// on.
func suspendedError(c *manifest.AgentConfig, why string) error {
	undo := "run `tend resume` to apply again"
	if c.Suspend {
		undo = "set suspend: false in the agent config to apply again"
	}
	return fmt.Errorf("device %s is suspended (%s): nothing is applied; %s, or `tend apply --force` to apply this once", c.Device, why, undo)
}
