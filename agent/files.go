package agent

import (
	"fmt"

	"github.com/tend-dev/tend/manifest"
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
	return fmt.Sprintf("%d models, %d files, %d services", len(d.Spec.Models), len(d.Spec.Files), len(d.Spec.Services))
}
