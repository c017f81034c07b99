package manifest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// LoadDevice is the one way tend turns manifest files into a device: it
// parses every Device document of inputs for device (see Load) and
// validates the merged result (see Validate), reporting every problem.
func LoadDevice(device string, inputs []Input, opts ValidateOptions) (*Device, error) {
	dev, err := Load(device, inputs)
	if err != nil {
		return nil, err
	}
	if err := dev.Validate(opts); err != nil {
		return nil, err
	}
	return dev, nil
}

// LoadDevices parses every Device document of inputs, merges them by
// metadata.name and validates each device. Its errors are every problem of
// every device, in file and line order.
func LoadDevices(inputs []Input, opts ValidateOptions) (map[string]*Device, error) {
	devices, err := LoadAll(inputs)
	if err != nil {
		return nil, err
	}
	var errs Errors
	for _, d := range devices {
		if err := d.Validate(opts); err != nil {
			errs = append(errs, err.(Errors)...)
		}
	}
	if len(errs) == 0 {
		return devices, nil
	}
	sort.SliceStable(errs, func(i, j int) bool {
		if errs[i].File != errs[j].File {
			return errs[i].File < errs[j].File
		}
		return errs[i].Line < errs[j].Line
	})
	return nil, errs
}

// ReadFiles reads the manifests among the given files and folders: a file
// is read as it is named, a folder is walked for the files IsManifest
// accepts (hidden folders are skipped). Each input is named by its path.
func ReadFiles(paths []string) ([]Input, error) {
	var inputs []Input
	var budget ReadBudget
	for _, p := range paths {
		err := filepath.WalkDir(p, func(name string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(p, name)
			if d.IsDir() {
				if name != p && !IsManifest(filepath.ToSlash(rel)+"/x.yaml") {
					return filepath.SkipDir // a hidden folder such as .github
				}
				return nil
			}
			if name != p && !IsManifest(filepath.ToSlash(rel)) {
				return nil
			}
			if fi, err := d.Info(); err == nil {
				if err := budget.Take(name, fi.Size()); err != nil {
					return err
				}
			}
			data, err := os.ReadFile(name)
			if err != nil {
				return err
			}
			inputs = append(inputs, Input{Name: name, Data: data})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read manifests: %w", err)
		}
	}
	if len(inputs) == 0 {
		return nil, fmt.Errorf("no *.yaml or *.yml files in %v", paths)
	}
	return inputs, nil
}
