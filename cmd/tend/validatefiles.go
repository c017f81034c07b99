package main

import (
	"errors"

	"github.com/tend-dev/tend/agent"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// fileCheck is what the files given to tend validate hold.
type fileCheck struct {
	Devices map[string]*manifest.Device
	Configs []checkedConfig // in file name order
	// AllowFrom is the config file whose allowPaths the devices were
	// checked against; "" when they came from flags or no config.
	AllowFrom string
}

// checkedConfig is an agent config file that validates.
type checkedConfig struct {
	File   string
	Config *manifest.AgentConfig
}

// validateFiles checks the given files and folders (folders are walked for
// *.yaml and *.yml): every Device document, merged by device name, and
// every file of kind AgentConfig as the agent reads its config. With
// configAllows, when exactly one config is among them, the devices are
// checked against its allowPaths instead of opts'.
func validateFiles(paths []string, opts manifest.ValidateOptions, configAllows bool) (*fileCheck, error) {
	inputs, err := manifest.ReadFiles(paths)
	if err != nil {
		return nil, err
	}
	out := &fileCheck{}
	var errs manifest.Errors
	var manifests []manifest.Input
	for _, in := range inputs {
		if !manifest.IsConfig(in.Data) {
			manifests = append(manifests, in)
			continue
		}
		c, err := agent.LoadConfig(in.Name, agent.Overrides{})
		var cerrs manifest.Errors
		switch {
		case errors.As(err, &cerrs):
			errs = append(errs, cerrs...)
		case err != nil:
			return nil, err
		default:
			out.Configs = append(out.Configs, checkedConfig{File: in.Name, Config: c})
		}
	}
	if configAllows && len(out.Configs) == 1 && len(errs) == 0 {
		out.AllowFrom = out.Configs[0].File
		opts = manifest.ValidateOptions{AllowPaths: out.Configs[0].Config.AllowPaths, CheckAllowPaths: true}
	}
	if len(manifests) > 0 {
		out.Devices, err = manifest.LoadDevices(manifests, opts)
		if errors.As(err, new(manifest.Errors)) {
			errs = append(errs, err.(manifest.Errors)...)
		} else if err != nil {
			return nil, err
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// count describes a device's resources in a few words.
func count(d *manifest.Device) string {
	return planner.Count(len(d.Spec.Models), "model") + ", " + planner.Count(len(d.Spec.Files), "file") + ", " + planner.Count(len(d.Spec.Services), "service")
}
