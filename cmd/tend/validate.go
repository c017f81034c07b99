package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/diff/validate"
	"github.com/tend-dev/tend/manifest"
)

const validateLong = "Without arguments, validate fetches this device's manifests from the fleet repo and checks them.\n" +
	"With files or folders, it checks every document in them without fetching anything (useful before a\n" +
	"commit): every device a Device document names, composed with the profiles its labels select; every\n" +
	"profile, with the devices it applies to, or on its own when it applies to none; every rollout, with the\n" +
	"devices it governs and the wave each falls in. A file of kind AgentConfig among them is checked as the\n" +
	"agent reads its config, and when it is the only one (and neither --allow-path nor --config is given) the\n" +
	"manifests are checked against its allowPaths; without any, allowPaths are not checked, and it says so.\n" +
	"A problem is printed once, under every device it is a problem of; warnings follow (a ${NAME} that is\n" +
	"no expansion, a wave whose selector takes no device).\n" +
	"With --all, it checks every device of the fleet repo (--repo, default .) at --rev, found as tend diff\n" +
	"finds them (--path with {device}, or --ref with {device} for a branch per device), and reports every\n" +
	"invalid device at once; --resolve also resolves every model ref and container image in its registry and\n" +
	"checks the signatures models.verify and runtime.verify of --config and their own verify ask for. Give\n" +
	"every source path the agents read, e.g. --path profiles --path 'devices/{device}' (or --config with an\n" +
	"agent config naming them):\n" +
	"every profile of the shared source paths is checked once (name, selector, variables) and listed with the\n" +
	"devices it applies to, every rollout with the wave each device falls in, and a device that renders to\n" +
	"nothing (no models, files or services) is warned about. CI knows only the devices with a Device document\n" +
	"in Git, and their labels in Git."

// validateCmd is tend validate and its flags.
type validateCmd struct {
	g            *globals
	all, resolve bool
	rev          string
}

func newValidateCommand(g *globals) *cobra.Command {
	v := &validateCmd{g: g}
	cmd := &cobra.Command{
		Use:   "validate [FILE|DIR...]",
		Short: "Check manifests: this device's from the fleet repo, or the given files for every device they declare",
		Long:  validateLong,
		RunE:  v.run,
	}
	g.addFlags(cmd, logFlags, []string{"device"}, sourceFlags, []string{"allow-empty"})
	f := cmd.Flags()
	f.BoolVar(&v.all, "all", false, "check every device of the fleet repo, as tend diff finds them")
	f.StringVar(&v.rev, "rev", "HEAD", "with --all: the revision to check; with --ref containing {device}, each device's branch unless given")
	f.BoolVar(&v.resolve, "resolve", false, "with --all: resolve every model ref and container image in its registry and check its signatures; a missing tag or repository, or a missing signature, is an error")
	return cmd
}

func (v *validateCmd) run(cmd *cobra.Command, args []string) error {
	if v.all {
		if len(args) > 0 {
			return fmt.Errorf("--all checks the fleet repo; give no files with it")
		}
		return v.repo(cmd)
	}
	if v.resolve || v.g.flags.Changed("rev") {
		return fmt.Errorf("--resolve and --rev go with --all")
	}
	if len(args) > 0 {
		return v.files(cmd, args)
	}
	return v.device(cmd)
}

// files checks the files and folders given (validate.Files).
func (v *validateCmd) files(cmd *cobra.Command, paths []string) error {
	changed := v.g.flags.Changed
	// A config is optional here (CI has none), but one that was asked for
	// must load, and --allow-path must be right.
	var opts manifest.ValidateOptions
	c, _, err := v.g.ciSetup(cmd)
	if err != nil && (changed("config") || changed("allow-path")) {
		return err
	}
	if err == nil && len(c.AllowPaths) > 0 {
		opts = manifest.ValidateOptions{AllowPaths: c.AllowPaths, CheckAllowPaths: true}
	}
	// A config among the files gives the allowPaths, unless a flag or
	// --config did.
	checked, err := validate.Files(paths, opts, !changed("allow-path") && !changed("config"))
	if err != nil {
		return err
	}
	return checked.Write(cmd.OutOrStdout())
}

// device checks this device's manifests, fetched from the fleet repo.
func (v *validateCmd) device(cmd *cobra.Command) error {
	c, log, err := v.g.setup(cmd)
	if err != nil {
		return err
	}
	snap, dev, err := v.g.reconciler(c, log).Manifests(cmd.Context())
	if err != nil {
		return err
	}
	validate.Device(cmd.OutOrStdout(), c.Device, snap.Revision.String(), dev)
	return nil
}

// repo checks every device of the fleet repo at --rev (validate.Repo).
func (v *validateCmd) repo(cmd *cobra.Command) error {
	c, log, err := v.g.ciSetup(cmd)
	if err != nil {
		return err
	}
	rev := v.rev
	if !v.g.flags.Changed("rev") && strings.Contains(c.Source.Ref, "{device}") {
		rev = c.Source.Ref // each device's own branch
	}
	repo, done, err := openFleet(cmd.Context(), c, log)
	if err != nil {
		return err
	}
	defer done()
	return validate.Repo(cmd.Context(), cmd.OutOrStdout(), repo, rev, diffOptions(c, v.resolve, log))
}
