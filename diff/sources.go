package diff

import (
	"fmt"
	"path"
	"strings"
)

// sources are the source paths of the agent config as diff reads them:
// the pattern of each device's folder, and the shared paths read with it.
type sources struct {
	device pattern
	shared []string // repo-relative, cleaned, "" for the root
	raw    string   // every path, for messages
}

// parseSources splits opts.Paths (or opts.Path) into the device folder
// pattern and the shared paths.
func parseSources(opts Options) (sources, error) {
	paths := opts.Paths
	if len(paths) == 0 {
		paths = []string{opts.Path}
	}
	s := sources{raw: strings.Join(paths, ", ")}
	device := -1
	for i, p := range paths {
		if !strings.Contains(p, devicePlaceholder) {
			continue
		}
		if device >= 0 {
			return s, fmt.Errorf("%w: --path %q and %q both contain {device}; diff finds each device by the one folder of its own, "+
				"so exactly one source path may contain {device}", ErrBadPattern, paths[device], p)
		}
		device = i
	}
	if device < 0 {
		device = 0 // a branch per device: its first path stands for the device
	}
	var err error
	if s.device, err = parsePattern("--path", paths[device], true); err != nil {
		return s, err
	}
	for i, p := range paths {
		if i == device {
			continue
		}
		if _, err := parsePattern("--path", p, true); err != nil {
			return s, err
		}
		if placeholder.MatchString(p) {
			return s, fmt.Errorf("%w: --path %q: a shared source path with {label:KEY} is read by the devices of one label value, "+
				"which diff cannot tell from the repo yet; list the folder of each label value, or keep it under the device's folder", ErrBadPattern, p)
		}
		clean := path.Clean(strings.ReplaceAll(p, "\\", "/"))
		if clean == "." {
			clean = ""
		}
		s.shared = append(s.shared, clean)
	}
	return s, nil
}

// several reports whether there are shared paths besides the device's.
func (s sources) several() bool { return len(s.shared) > 0 }

// displayPatterns names the source paths of opts in messages.
func displayPatterns(opts Options) string {
	if len(opts.Paths) > 0 {
		return strings.Join(opts.Paths, ", ")
	}
	return opts.Path
}

// apart reports whether the shared paths are apart from the device
// folders: none holds them, or another shared path.
func (s sources) apart() bool {
	prefix, _, _ := strings.Cut(strings.ReplaceAll(s.device.raw, "\\", "/"), "{")
	prefix = strings.Trim(path.Clean("/"+prefix), "/")
	dirs := append([]string{prefix}, s.shared...)
	for i, a := range dirs {
		for j, b := range dirs {
			if i != j && (within(a, b) || i == 0 && within(b, a)) {
				return false
			}
		}
	}
	return true
}
