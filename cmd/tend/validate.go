package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/source"
)

func newValidateCommand(g *globals) *cobra.Command {
	var all, resolve bool
	var rev string
	cmd := &cobra.Command{
		Use:   "validate [FILE|DIR...]",
		Short: "Check manifests: this device's from the fleet repo, or the given files for every device they declare",
		Long: "Without arguments, validate fetches this device's manifests from the fleet repo and checks them.\n" +
			"With files or folders, it checks every Device document in them, grouped by metadata.name,\n" +
			"without fetching anything (useful before a commit). A file of kind AgentConfig among them is checked\n" +
			"as the agent reads its config, and when it is the only one (and neither --allow-path nor --config is\n" +
			"given) the manifests are checked against its allowPaths.\n" +
			"With --all, it checks every device of the fleet repo (--repo, default .) at --rev, found as tend diff\n" +
			"finds them (--path with {device}, or --ref with {device} for a branch per device), and reports every\n" +
			"invalid device at once; --resolve also resolves every model ref in its registry. Give every source path the\n" +
			"agents read, e.g. --path profiles --path 'devices/{device}' (or --config with an agent config naming them):\n" +
			"every profile of the shared source paths is checked once (name, selector, variables) and listed with the\n" +
			"devices it applies to, and a device that renders to nothing (no models, files or services) is warned about.\n" +
			"CI knows only the devices with a Device document in Git, and their labels in Git.",
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if all {
				if len(args) > 0 {
					return fmt.Errorf("--all checks the fleet repo; give no files with it")
				}
				return g.validateAll(cmd, rev, resolve)
			}
			if resolve || g.flags.Changed("rev") {
				return fmt.Errorf("--resolve and --rev go with --all")
			}
			if len(args) > 0 {
				// A config is optional here (CI has none), but one that was
				// asked for must load, and --allow-path must be right.
				var opts manifest.ValidateOptions
				c, _, err := g.ciSetup(cmd)
				if err != nil && (g.flags.Changed("config") || g.flags.Changed("allow-path")) {
					return err
				}
				if err == nil && len(c.AllowPaths) > 0 {
					opts = manifest.ValidateOptions{AllowPaths: c.AllowPaths, CheckAllowPaths: true}
				}
				// A config among the files gives the allowPaths, unless
				// a flag or --config did.
				fromFiles := !g.flags.Changed("allow-path") && !g.flags.Changed("config")
				checked, err := validateFiles(args, opts, fromFiles)
				if err != nil {
					return err
				}
				for _, c := range checked.Configs {
					fmt.Fprintf(out, "valid: agent config %s: device %s, source %s\n", c.File, c.Config.Device, source.RedactURL(c.Config.Source.URL))
				}
				names := make([]string, 0, len(checked.Devices))
				for n := range checked.Devices {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					fmt.Fprintf(out, "valid: device %s: %s\n", n, count(checked.Devices[n]))
				}
				if checked.AllowFrom != "" && len(names) > 0 {
					fmt.Fprintf(out, "(paths checked against the allowPaths of %s)\n", checked.AllowFrom)
				}
				return nil
			}
			c, log, err := g.setup(cmd)
			if err != nil {
				return err
			}
			snap, dev, err := g.reconciler(c, log).Manifests(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "valid: device %s at %s: %s\n", c.Device, snap.Revision.String(), count(dev))
			return nil
		},
	}
	g.addFlags(cmd, logFlags, []string{"device"}, sourceFlags, []string{"allow-empty"})
	f := cmd.Flags()
	f.BoolVar(&all, "all", false, "check every device of the fleet repo, as tend diff finds them")
	f.StringVar(&rev, "rev", "HEAD", "with --all: the revision to check; with --ref containing {device}, each device's branch unless given")
	f.BoolVar(&resolve, "resolve", false, "with --all: resolve every model ref in its registry; a missing tag or repository is an error")
	return cmd
}

// validateAll checks every device of the fleet repo at rev and reports
// every invalid one, with file and field, before failing.
func (g *globals) validateAll(cmd *cobra.Command, rev string, resolve bool) error {
	c, log, err := g.ciSetup(cmd)
	if err != nil {
		return err
	}
	if !g.flags.Changed("rev") && strings.Contains(c.Source.Ref, "{device}") {
		rev = c.Source.Ref // each device's own branch
	}
	repo, done, err := openFleet(cmd.Context(), c, log)
	if err != nil {
		return err
	}
	defer done()
	checked, err := diff.Validate(cmd.Context(), repo, rev, diffOptions(c, resolve, log))
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	var invalid []string
	for _, d := range checked {
		if d.Err != nil {
			invalid = append(invalid, d.Name)
			fmt.Fprintf(out, "invalid: device %s at %s:\n  %s\n", d.Name, d.Revision, strings.ReplaceAll(d.Err.Error(), "\n", "\n  "))
			continue
		}
		fmt.Fprintf(out, "valid: device %s at %s: %s\n", d.Name, d.Revision, count(d.Device))
		if d.Warning != "" {
			fmt.Fprintf(out, "warning: device %s %s\n", d.Name, d.Warning)
		}
	}
	profiles, perr := diff.ValidateProfiles(cmd.Context(), repo, rev, diffOptions(c, resolve, log), checked)
	for _, p := range profiles {
		fmt.Fprintf(out, "valid: %s (%s:%d): %s\n", p.Name, p.File, p.Line, profileReach(p.Devices))
	}
	if perr != nil {
		fmt.Fprintf(out, "invalid: profiles at %s:\n  %s\n", rev, strings.ReplaceAll(perr.Error(), "\n", "\n  "))
	}
	if len(checked) == 0 && len(profiles) == 0 && perr == nil {
		return fmt.Errorf("no devices at %s matching --path %q or --ref %q", rev, strings.Join(c.SourcePatterns(), ", "), c.Source.Ref)
	}
	if len(checked) == 0 {
		fmt.Fprintf(out, "no device with a Device document at %s: devices known only by their agent config labels cannot be checked from Git\n", rev)
	}
	var failed []string
	if len(invalid) > 0 {
		failed = append(failed, fmt.Sprintf("%d of %s invalid: %s", len(invalid), planner.Count(len(checked), "device"), strings.Join(invalid, ", ")))
	}
	if perr != nil {
		failed = append(failed, "the profiles of the shared source paths are invalid")
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// maxReachNames bounds the devices named per profile.
const maxReachNames = 10

// profileReach says which inventory devices a profile applies to.
func profileReach(devices []string) string {
	if len(devices) == 0 {
		return "applies to no device with a Device document in Git (it may still match devices known only by their agent config labels)"
	}
	names := devices
	if len(names) > maxReachNames {
		names = append(names[:maxReachNames:maxReachNames], fmt.Sprintf("… and %d more", len(devices)-maxReachNames))
	}
	return "applies to " + planner.Count(len(devices), "device") + ": " + strings.Join(names, ", ")
}
