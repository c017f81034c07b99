package agent

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/tend-dev/tend/manifest"
)

// ValidateFiles checks every Device document in the given files and folders
// (folders are walked for *.yaml and *.yml) and returns the devices by name.
func ValidateFiles(paths []string, opts manifest.ValidateOptions) (map[string]*manifest.Device, error) {
	var inputs []manifest.Input
	for _, p := range paths {
		err := filepath.WalkDir(p, func(name string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(p, name)
			if d.IsDir() {
				if name != p && !manifest.IsManifest(filepath.ToSlash(rel)+"/x.yaml") {
					return filepath.SkipDir // a hidden folder such as .github
				}
				return nil
			}
			if name != p && !manifest.IsManifest(filepath.ToSlash(rel)) {
				return nil
			}
			data, err := os.ReadFile(name)
			if err != nil {
				return err
			}
			inputs = append(inputs, manifest.Input{Name: name, Data: data})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read manifests: %w", err)
		}
	}
	if len(inputs) == 0 {
		return nil, fmt.Errorf("no *.yaml or *.yml files in %v", paths)
	}
	devices, err := manifest.LoadAll(inputs)
	if err != nil {
		return nil, err
	}
	var errs manifest.Errors
	for _, d := range devices {
		if err := d.Validate(opts); err != nil {
			errs = append(errs, err.(manifest.Errors)...)
		}
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool {
			if errs[i].File != errs[j].File {
				return errs[i].File < errs[j].File
			}
			return errs[i].Line < errs[j].Line
		})
		return nil, errs
	}
	return devices, nil
}

// Count describes a device's resources in a few words.
func Count(d *manifest.Device) string {
	return fmt.Sprintf("%d models, %d files, %d services", len(d.Spec.Models), len(d.Spec.Files), len(d.Spec.Services))
}
