package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

func newValidateCommand(g *globals) *cobra.Command {
	var all, resolve bool
	var rev string
	cmd := &cobra.Command{
		Use:   "validate [FILE|DIR...]",
		Short: "Check manifests: this device's from the fleet repo, or the given files for every device they declare",
		Long: "Without arguments, validate fetches this device's manifests from the fleet repo and checks them.\n" +
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
			"in Git, and their labels in Git.",
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
				return checked.write(out)
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
			writeFindings(out, "warning", []finding{{Kind: "device", Subject: c.Device, Err: warningsError(dev.Warnings)}})
			return nil
		},
	}
	g.addFlags(cmd, logFlags, []string{"device"}, sourceFlags, []string{"allow-empty"})
	f := cmd.Flags()
	f.BoolVar(&all, "all", false, "check every device of the fleet repo, as tend diff finds them")
	f.StringVar(&rev, "rev", "HEAD", "with --all: the revision to check; with --ref containing {device}, each device's branch unless given")
	f.BoolVar(&resolve, "resolve", false, "with --all: resolve every model ref and container image in its registry and check its signatures; a missing tag or repository, or a missing signature, is an error")
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
	invalid := map[string]bool{}
	var bad []string
	var failed, warned []finding
	var devices []labeled
	applies := map[string][]string{} // profile/NAME → the devices it applies to
	for _, d := range checked {
		at := " at " + d.Revision
		if d.Err != nil {
			invalid[d.Name] = true
			bad = append(bad, d.Name)
			failed = append(failed, finding{Kind: "device", Subject: d.Name, At: at, Err: d.Err})
			warned = append(warned, finding{Kind: "device", Subject: d.Name, At: at, Err: composeWarnings(d.Err)})
			// What was known of the device before it failed: a profile
			// that applies only to invalid devices applies to them.
			var ce *manifest.ComposeError
			if errors.As(d.Err, &ce) {
				devices = append(devices, labeled{name: d.Name, labels: ce.Labels})
				for _, p := range ce.Profiles {
					applies[p] = append(applies[p], d.Name)
				}
			}
			continue
		}
		fmt.Fprintf(out, "valid: device %s%s: %s\n", d.Name, at, count(d.Device))
		devices = append(devices, labeled{name: d.Name, labels: d.Device.Metadata.Labels})
		for _, p := range d.Profiles {
			applies[p] = append(applies[p], d.Name)
		}
		warned = append(warned, finding{Kind: "device", Subject: d.Name, At: at, Err: warningsError(d.Device.Warnings)})
		if d.Warning != "" {
			fmt.Fprintf(out, "warning: device %s %s\n", d.Name, d.Warning)
		}
	}
	writeFindings(out, "invalid", failed)
	opts := diffOptions(c, resolve, log)
	profiles, perr := diff.ValidateProfiles(cmd.Context(), repo, rev, opts, checked)
	starts := map[string][]int{}
	for _, p := range profiles {
		starts[p.File] = append(starts[p.File], p.Line)
	}
	var badProfiles []string
	for _, p := range profiles {
		word := "valid"
		for _, d := range checked {
			for _, e := range manifest.AsErrors(d.Err) {
				if inDocument(e, p.File, p.Line, starts) {
					word = "invalid"
				}
			}
		}
		if word == "invalid" {
			badProfiles = append(badProfiles, p.Name)
		}
		fmt.Fprintf(out, "%s: %s (%s:%d): %s\n", word, p.Name, p.File, p.Line, reach("applies to", applies[p.Name], "in Git", invalid))
	}
	if perr != nil {
		fmt.Fprintf(out, "invalid: profiles at %s:\n  %s\n", rev, strings.ReplaceAll(perr.Error(), "\n", "\n  "))
	} else {
		rollouts, err := diff.SharedRollouts(cmd.Context(), repo, rev, opts)
		if err != nil {
			return err
		}
		for _, r := range rollouts {
			if ws := rolloutReport(out, r, devices, "in Git", invalid); len(ws) > 0 {
				warned = append(warned, finding{Subject: "rollout/" + r.Metadata.Name, Err: warningsError(ws)})
			}
		}
	}
	writeFindings(out, "warning", warned)
	if len(checked) == 0 && len(profiles) == 0 && perr == nil {
		return fmt.Errorf("no devices at %s matching --path %q or --ref %q", rev, strings.Join(c.SourcePatterns(), ", "), c.Source.Ref)
	}
	if len(checked) == 0 {
		fmt.Fprintf(out, "no device with a Device document at %s: devices known only by their agent config labels cannot be checked from Git\n", rev)
	} else {
		fmt.Fprintln(out, allowNote(manifest.ValidateOptions{AllowPaths: c.AllowPaths, CheckAllowPaths: len(c.AllowPaths) > 0}, "", "--config or --allow-path"))
	}
	var failures []string
	if len(bad) > 0 {
		failures = append(failures, fmt.Sprintf("%d of %s invalid: %s", len(bad), planner.Count(len(checked), "device"), strings.Join(bad, ", ")))
	}
	if len(badProfiles) > 0 {
		failures = append(failures, fmt.Sprintf("%s invalid: %s", planner.Count(len(badProfiles), "profile"), strings.Join(capNames(badProfiles), ", ")))
	}
	if perr != nil {
		failures = append(failures, "the profiles of the shared source paths are invalid")
	}
	if len(failures) > 0 {
		return errors.New(strings.Join(failures, "; "))
	}
	return nil
}

// maxReachNames bounds the devices named per profile.
const maxReachNames = 10
