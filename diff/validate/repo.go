package validate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	git "github.com/go-git/go-git/v5"

	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// inGit is where validate --all knows devices from.
const inGit = "in Git"

// Repo checks every device of the fleet repo at rev, found as tend diff
// finds them (diff.Validate), every profile of the shared source paths
// with the devices it applies to and every rollout with the wave each
// device falls in, and writes what it checked to out: every invalid
// device at once, with file and field, each problem once under the
// devices it is a problem of, then the warnings. The error names what is
// invalid.
func Repo(ctx context.Context, out io.Writer, repo *git.Repository, rev string, opts diff.Options) error {
	checked, err := diff.Validate(ctx, repo, rev, opts)
	if err != nil {
		return err
	}
	r := writeDevices(out, checked)
	profiles, perr := diff.ValidateProfiles(ctx, repo, rev, opts, checked)
	badProfiles := r.writeProfiles(out, profiles)
	if perr != nil {
		fmt.Fprintf(out, "invalid: profiles at %s:\n  %s\n", rev, strings.ReplaceAll(perr.Error(), "\n", "\n  "))
	} else {
		rollouts, err := diff.SharedRollouts(ctx, repo, rev, opts)
		if err != nil {
			return err
		}
		for _, ro := range rollouts {
			if ws := rolloutReport(out, ro, r.devices, inGit, r.invalid); len(ws) > 0 {
				r.warned = append(r.warned, finding{Subject: "rollout/" + ro.Metadata.Name, Err: warningsError(ws)})
			}
		}
	}
	writeFindings(out, "warning", r.warned)
	if len(checked) == 0 && len(profiles) == 0 && perr == nil {
		return fmt.Errorf("no devices at %s matching --path %q or --ref %q", rev, strings.Join(patterns(opts), ", "), opts.Ref)
	}
	if len(checked) == 0 {
		fmt.Fprintf(out, "no device with a Device document at %s: devices known only by their agent config labels cannot be checked from Git\n", rev)
	} else {
		fmt.Fprintln(out, allowNote(manifest.ValidateOptions{AllowPaths: opts.AllowPaths, CheckAllowPaths: len(opts.AllowPaths) > 0}, "", "--config or --allow-path"))
	}
	var failures []string
	if len(r.bad) > 0 {
		failures = append(failures, fmt.Sprintf("%d of %s invalid: %s", len(r.bad), planner.Count(len(checked), "device"), strings.Join(r.bad, ", ")))
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

// repoReport is what Repo learnt of the devices of the repo, for the
// profiles, the rollouts and the summary.
type repoReport struct {
	checked []diff.Checked
	invalid map[string]bool
	bad     []string // the invalid devices, in order
	warned  []finding
	devices []labeled
	applies map[string][]string // profile/NAME → the devices it applies to
}

// writeDevices writes a line per valid device (and the warning of one
// that renders to nothing), then the problems of the invalid ones.
func writeDevices(out io.Writer, checked []diff.Checked) *repoReport {
	r := &repoReport{checked: checked, invalid: map[string]bool{}, applies: map[string][]string{}}
	var failed []finding
	for _, d := range checked {
		at := " at " + d.Revision
		if d.Err != nil {
			r.invalid[d.Name] = true
			r.bad = append(r.bad, d.Name)
			failed = append(failed, finding{Kind: "device", Subject: d.Name, At: at, Err: d.Err})
			r.warned = append(r.warned, finding{Kind: "device", Subject: d.Name, At: at, Err: composeWarnings(d.Err)})
			// What was known of the device before it failed: a profile
			// that applies only to invalid devices applies to them.
			var ce *manifest.ComposeError
			if errors.As(d.Err, &ce) {
				r.add(d.Name, ce.Labels, ce.Profiles)
			}
			continue
		}
		fmt.Fprintf(out, "valid: device %s%s: %s\n", d.Name, at, count(d.Device))
		r.add(d.Name, d.Device.Metadata.Labels, d.Profiles)
		r.warned = append(r.warned, finding{Kind: "device", Subject: d.Name, At: at, Err: warningsError(d.Device.Warnings)})
		if d.Warning != "" {
			fmt.Fprintf(out, "warning: device %s %s\n", d.Name, d.Warning)
		}
	}
	writeFindings(out, "invalid", failed)
	return r
}

// add records a device, its labels and the profiles that apply to it.
func (r *repoReport) add(name string, labels map[string]string, profiles []string) {
	r.devices = append(r.devices, labeled{name: name, labels: labels})
	for _, p := range profiles {
		r.applies[p] = append(r.applies[p], name)
	}
}

// writeProfiles writes a line per profile of the shared source paths with
// the devices it applies to, and returns those that are invalid: a
// problem of a device that lies in the profile's document.
func (r *repoReport) writeProfiles(out io.Writer, profiles []diff.CheckedProfile) []string {
	starts := map[string][]int{}
	for _, p := range profiles {
		starts[p.File] = append(starts[p.File], p.Line)
	}
	var bad []string
	for _, p := range profiles {
		word := "valid"
		for _, d := range r.checked {
			for _, e := range manifest.AsErrors(d.Err) {
				if inDocument(e, p.File, p.Line, starts) {
					word = "invalid"
				}
			}
		}
		if word == "invalid" {
			bad = append(bad, p.Name)
		}
		fmt.Fprintf(out, "%s: %s (%s:%d): %s\n", word, p.Name, p.File, p.Line, reach("applies to", r.applies[p.Name], inGit, r.invalid))
	}
	return bad
}

// patterns are the source paths of opts, as source.paths or source.path
// name them.
func patterns(opts diff.Options) []string {
	if len(opts.Paths) > 0 {
		return opts.Paths
	}
	return []string{opts.Path}
}

// Device writes the check of one device, name at rev (tend validate of
// this device): its resources, and the warnings of its composition.
func Device(out io.Writer, name, rev string, d *manifest.Device) {
	fmt.Fprintf(out, "valid: device %s at %s: %s\n", name, rev, count(d))
	writeFindings(out, "warning", []finding{{Kind: "device", Subject: name, Err: warningsError(d.Warnings)}})
}
