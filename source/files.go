package source

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/tend-dev/tend/internal/errkind"
)

// cleanPath turns the configured folder into a clean repo-relative path,
// "" for the repository root. It rejects absolute paths and paths that climb
// out of the repository.
func cleanPath(p string) (string, error) {
	p = strings.ReplaceAll(p, "\\", "/")
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q must be relative to the repository root", p)
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return "", fmt.Errorf("path %q must not contain \"..\"", p)
		}
	}
	p = path.Clean(p)
	if p == "." {
		return "", nil
	}
	return p, nil
}

// CleanPaths cleans the Dir of every path into a repo-relative path, ""
// for the root; an absolute path, or one that climbs out of the repo, is an
// error.
func CleanPaths(paths []Path) ([]Path, error) {
	out := make([]Path, len(paths))
	for i, p := range paths {
		dir, err := cleanPath(p.Dir)
		if err != nil {
			return nil, err
		}
		out[i] = Path{Dir: dir, PerDevice: p.PerDevice}
	}
	return out, nil
}

// Collect gathers the files read reads under each of dirs (cleaned by
// CleanPaths), each once (paths may overlap), sorted by path; read returns
// an error wrapping ErrPathNotFound for a folder that is not there. A file
// is PerDevice when a PerDevice path reaches it. shown and rev name the
// tree in errors.
//
// With no file under any path, the error is ErrPathNotFound. Otherwise a
// path that is not there is an error (ErrSharedPathNotFound) unless it is
// PerDevice: a device may have no folder of its own and take everything
// from the shared paths, but a shared path that is missing is a typo or a
// deleted folder, which would silently drop what it held.
func Collect(dirs []Path, shown, rev string, read func(Path) ([]File, error)) ([]File, error) {
	byPath := map[string]int{}
	var files []File
	var missing []error
	var shared []string // missing paths without {device}
	for _, d := range dirs {
		found, err := read(d)
		if errors.Is(err, ErrPathNotFound) {
			missing = append(missing, err)
			if !d.PerDevice {
				shared = append(shared, d.Dir)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, f := range found {
			f.PerDevice = d.PerDevice
			if i, ok := byPath[f.Path]; ok {
				files[i].PerDevice = files[i].PerDevice || f.PerDevice
				continue
			}
			byPath[f.Path] = len(files)
			files = append(files, f)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	switch {
	case len(files) == 0 && len(dirs) == 1 && len(missing) == 1:
		return nil, missing[0]
	case len(files) == 0:
		return nil, errkind.New(ErrPathNotFound, "no *.yaml or *.yml files under %s in %s at %s", displayDirs(dirs), shown, rev)
	case len(shared) > 0:
		return nil, errkind.New(ErrSharedPathNotFound, "source path %s not found in %s at %s: a path without {device} must exist "+
			"(a misspelt or deleted folder would drop what it holds from every device); fix source.paths or restore the folder",
			quoteDirs(shared), shown, rev)
	}
	return files, nil
}

func displayDir(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// displayDirs names the folders of dirs: "devices/cam-017" for one,
// "any of profiles, devices/cam-017" for several.
func displayDirs(dirs []Path) string {
	if len(dirs) == 1 {
		return fmt.Sprintf("%q", displayDir(dirs[0].Dir))
	}
	names := make([]string, len(dirs))
	for i, d := range dirs {
		names[i] = displayDir(d.Dir)
	}
	return "any of " + strings.Join(names, ", ")
}

// quoteDirs names folders: "profiles" for one, "a", "b" for several.
func quoteDirs(dirs []string) string {
	q := make([]string, len(dirs))
	for i, d := range dirs {
		q[i] = fmt.Sprintf("%q", displayDir(d))
	}
	return strings.Join(q, ", ")
}
