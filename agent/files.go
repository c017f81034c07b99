package agent

import (
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// ValidateFiles checks every Device document in the given files and folders
// (folders are walked for *.yaml and *.yml) and returns the devices by name.
func ValidateFiles(paths []string, opts manifest.ValidateOptions) (map[string]*manifest.Device, error) {
	inputs, err := manifest.ReadFiles(paths)
	if err != nil {
		return nil, err
	}
	return manifest.LoadDevices(inputs, opts)
}

// Count describes a device's resources in a few words.
func Count(d *manifest.Device) string {
	return planner.Count(len(d.Spec.Models), "model") + ", " + planner.Count(len(d.Spec.Files), "file") + ", " + planner.Count(len(d.Spec.Services), "service")
}
