package container

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
)

// Confinement bounds the host paths a container may mount, as tend's own
// writes are bounded: the engine follows a symlink in a mount source on
// the host, so a link under allowPaths would otherwise give a container
// any folder of the node.
type Confinement struct {
	// Root is the node's root ("/" on a device); AllowPaths are under it.
	Root       string
	AllowPaths []string
	// StateDir holds the model store, which ${model:…} sources link into.
	StateDir string
}

// mountSource returns the path the engine mounts for source: source with
// every symlink followed, which must lie under Root joined with an
// allowPaths entry, or in the model store under StateDir. A source that
// does not exist, or that leads elsewhere, is a service.ErrInvalidInstance
// error naming the service, the source and where it leads.
func (c *Confinement) mountSource(svc, source string) (string, error) {
	resolved, err := filepath.EvalSymlinks(source)
	if err != nil {
		return "", service.Invalidf("service %s: mount source %s: %v: create it, or fix mounts in the manifest", svc, source, unwrapPath(err))
	}
	if resolved, err = filepath.Abs(resolved); err != nil {
		return "", service.Invalidf("service %s: mount source %s: %v", svc, source, err)
	}
	root := realPath(cmp.Or(c.Root, manifest.DefaultRoot))
	for _, a := range c.AllowPaths {
		if within(resolved, filepath.Join(root, a)) {
			return resolved, nil
		}
	}
	if within(resolved, realPath(string(statedir.Dir(cmp.Or(c.StateDir, manifest.DefaultStateDir)).Models()))) {
		return resolved, nil
	}
	return "", service.Invalidf("service %s: mount source %s resolves to %s, outside allowPaths %v under root %s and the model store: "+
		"a symlink on the node leads out of them; remove the link, or mount a path under allowPaths that is not one",
		svc, source, resolved, c.AllowPaths, cmp.Or(c.Root, manifest.DefaultRoot))
}

// checkExisting checks, as mountSource does, the sources of mounts that
// exist now: one the plan itself creates is checked at the start.
func (c *Confinement) checkExisting(svc string, mounts []Mount) error {
	for _, m := range mounts {
		if _, err := c.mountSource(svc, m.Source); err != nil {
			if _, lerr := os.Lstat(m.Source); errors.Is(lerr, fs.ErrNotExist) {
				continue
			}
			if _, serr := os.Stat(m.Source); errors.Is(serr, fs.ErrNotExist) {
				continue // a link to what the plan creates
			}
			return err
		}
	}
	return nil
}

// realPath is p with its symlinks followed, or p clean when it cannot be.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// within reports whether p is dir or lies under it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}
