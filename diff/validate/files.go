package validate

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/tend-dev/tend/config"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/source"
)

// FileCheck is what the files given to tend validate hold.
type FileCheck struct {
	Fleet   *manifest.FleetCheck // nil when only configs were given
	Configs []CheckedConfig      // in file name order
	// Opts are the limits the devices were checked against.
	Opts manifest.ValidateOptions
	// AllowFrom is the config file whose allowPaths the devices were
	// checked against; "" when they came from flags or no config.
	AllowFrom string
}

// CheckedConfig is an agent config file that validates.
type CheckedConfig struct {
	File   string
	Config *manifest.AgentConfig
}

// Files checks the given files and folders (folders are walked for
// *.yaml and *.yml): every Profile, Rollout and Device document (see
// manifest.CheckFleet) and every file of kind AgentConfig as the agent
// reads its config (config.Load). With configAllows, when exactly one
// config is among them, the devices are checked against its allowPaths
// instead of opts'. The error is every problem of a document that does
// not parse, or of a config; the devices' and profiles' own are in the
// check.
func Files(paths []string, opts manifest.ValidateOptions, configAllows bool) (*FileCheck, error) {
	inputs, err := manifest.ReadFiles(paths)
	if err != nil {
		return nil, err
	}
	out := &FileCheck{Opts: opts}
	var errs manifest.Errors
	var manifests []manifest.Input
	for _, in := range inputs {
		if !manifest.IsConfig(in.Data) {
			manifests = append(manifests, in)
			continue
		}
		c, err := config.Load(in.Name, config.Overrides{})
		var cerrs manifest.Errors
		switch {
		case errors.As(err, &cerrs):
			errs = append(errs, cerrs...)
		case err != nil:
			return nil, err
		default:
			out.Configs = append(out.Configs, CheckedConfig{File: in.Name, Config: c})
		}
	}
	if configAllows && len(out.Configs) == 1 && len(errs) == 0 {
		out.AllowFrom = out.Configs[0].File
		out.Opts = manifest.ValidateOptions{AllowPaths: out.Configs[0].Config.AllowPaths, CheckAllowPaths: true}
	}
	if len(manifests) > 0 {
		out.Fleet, err = manifest.CheckFleet(manifests, out.Opts)
		if perrs := manifest.AsErrors(err); perrs != nil {
			errs = append(errs, perrs...)
		} else if err != nil {
			return nil, err
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// inFiles is where validate of files knows devices from.
const inFiles = "in the files given"

// Write prints what was checked, one line per document (a device's
// resources, a profile's and a rollout's reach among the devices of the
// files, a rollout's waves), every problem once under the devices or
// document it is a problem of, the warnings, and whether paths were
// checked against allowPaths. It returns an error naming what is invalid.
func (fc *FileCheck) Write(out io.Writer) error {
	for _, c := range fc.Configs {
		fmt.Fprintf(out, "valid: agent config %s: device %s, source %s\n", c.File, c.Config.Device, source.RedactURL(c.Config.Source.URL))
	}
	f := fc.Fleet
	if f == nil {
		return nil
	}
	invalid := map[string]bool{}
	var failed, warned []finding
	var bad []string
	devices := make([]labeled, 0, len(f.Devices))
	for _, d := range f.Devices {
		devices = append(devices, labeled{name: d.Name, labels: d.Labels})
		if d.Err != nil {
			invalid[d.Name] = true
			bad = append(bad, d.Name)
			failed = append(failed, finding{Kind: "device", Subject: d.Name, Err: d.Err})
			warned = append(warned, finding{Kind: "device", Subject: d.Name, Err: composeWarnings(d.Err)})
			continue
		}
		fmt.Fprintf(out, "valid: device %s: %s\n", d.Name, count(d.Composed.Device))
		warned = append(warned, finding{Kind: "device", Subject: d.Name, Err: warningsError(d.Composed.Warnings)})
	}
	writeFindings(out, "invalid", failed)

	starts := map[string][]int{}
	for _, p := range f.Profiles {
		starts[p.Profile.Origin.File] = append(starts[p.Profile.Origin.File], p.Profile.Origin.Start())
	}
	for _, r := range f.Rollouts {
		starts[r.Rollout.Origin.File] = append(starts[r.Rollout.Origin.File], r.Rollout.Origin.Start())
	}
	var badProfiles []string
	for _, p := range f.Profiles {
		id := "profile/" + p.Profile.Metadata.Name
		where := fmt.Sprintf("%s (%s:%d)", id, p.Profile.Origin.File, p.Profile.Origin.Line("metadata.name"))
		if p.Alone {
			if p.Err != nil {
				badProfiles = append(badProfiles, id)
				fmt.Fprintf(out, "invalid: %s: %s; checked on its own:\n  %s\n", where, reach("applies to", nil, inFiles, nil),
					strings.ReplaceAll(p.Err.Error(), "\n", "\n  "))
			} else {
				fmt.Fprintf(out, "valid: %s: %s; checked on its own\n", where, reach("applies to", nil, inFiles, nil))
			}
			warned = append(warned, finding{Subject: id + " (checked on its own)", Err: warningsError(p.Warnings)})
			continue
		}
		word := "valid"
		for _, d := range f.Devices {
			for _, e := range manifest.AsErrors(d.Err) {
				if inDocument(e, p.Profile.Origin.File, p.Profile.Origin.Start(), starts) {
					word = "invalid"
				}
			}
		}
		if word == "invalid" {
			badProfiles = append(badProfiles, id)
		}
		fmt.Fprintf(out, "%s: %s: %s\n", word, where, reach("applies to", p.Devices, inFiles, invalid))
	}
	for _, r := range f.Rollouts {
		if ws := rolloutReport(out, r.Rollout, devices, inFiles, invalid); len(ws) > 0 {
			warned = append(warned, finding{Subject: "rollout/" + r.Rollout.Metadata.Name, Err: warningsError(ws)})
		}
	}
	writeFindings(out, "warning", warned)
	if len(f.Devices) > 0 {
		fmt.Fprintln(out, allowNote(fc.Opts, fc.AllowFrom, "--config, --allow-path or an AgentConfig file among the files"))
	}
	var problems []string
	if len(bad) > 0 {
		problems = append(problems, fmt.Sprintf("%d of %s invalid: %s", len(bad), planner.Count(len(f.Devices), "device"), strings.Join(capNames(bad), ", ")))
	}
	if len(badProfiles) > 0 {
		problems = append(problems, fmt.Sprintf("%s invalid: %s", planner.Count(len(badProfiles), "profile"), strings.Join(capNames(badProfiles), ", ")))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// count describes a device's resources in a few words.
func count(d *manifest.Device) string {
	return planner.Count(len(d.Spec.Models), "model") + ", " + planner.Count(len(d.Spec.Files), "file") + ", " + planner.Count(len(d.Spec.Services), "service")
}
