package diff

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// readInputs returns the manifest files of a device's folder at one
// revision, named by their path in the repo. Symlinks and submodules are
// skipped, as gitsource skips them.
func readInputs(repo *git.Repository, loc *location) ([]manifest.Input, error) {
	tree, err := object.GetTree(repo.Storer, loc.Tree)
	if err != nil {
		return nil, fmt.Errorf("read tree of %s at %s: %w", displayPath(loc.Path), loc.Rev, err)
	}
	files, err := gitsource.TreeFiles(tree, loc.Path)
	if err != nil {
		return nil, fmt.Errorf("read files under %s at %s: %w", displayPath(loc.Path), loc.Rev, err)
	}
	inputs := make([]manifest.Input, len(files))
	for i, f := range files {
		inputs[i] = manifest.Input{Name: f.Path, Data: f.Data}
	}
	return inputs, nil
}

func displayPath(p string) string {
	if p == "" {
		return "the repo root"
	}
	return p
}

// load parses and validates a device's manifests. Paths are not checked
// against allowPaths: CI has no node and so no allowPaths, unless given.
func load(device string, inputs []manifest.Input, allow []string) (*manifest.Device, error) {
	dev, err := manifest.Load(device, inputs)
	if err == nil {
		err = dev.Validate(manifest.ValidateOptions{AllowPaths: allow, CheckAllowPaths: len(allow) > 0})
	}
	return dev, err
}

// renderer turns devices into planner resources with an Applier that has
// no node: its root and state dir are a temp folder, every path is
// allowed, and models are planned by their declaration, or resolved in
// their registries (tags to digests, sizes from the manifests; no layer is
// downloaded). One temp folder serves every render of a diff, so a
// service's spec (which holds the paths of the models it uses) is the same
// at base and head when its declaration is.
type renderer struct {
	cfg     applier.Config
	dir     string
	renders int
}

func newRenderer(opts Options) (*renderer, error) {
	dir, err := os.MkdirTemp("", "tend-diff-")
	if err != nil {
		return nil, err
	}
	root, state := filepath.Join(dir, "root"), filepath.Join(dir, "state")
	if err := os.MkdirAll(root, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &renderer{dir: dir, cfg: applier.Config{
		Root:       root,
		StateDir:   state,
		AllowPaths: []string{"/"},
		Models:     applier.ModelOptions{Registry: opts.Registry, Unresolved: !opts.Resolve},
		// Never started: Desired only expands service specs.
		Supervisor: applier.NewSupervisor(state, service.NewExec(applier.CgroupParent, log), log),
		Logger:     log,
	}}, nil
}

func (r *renderer) Close() error { return os.RemoveAll(r.dir) }

// desired returns what dev declares at revision, as the planner compares
// it.
func (r *renderer) desired(ctx context.Context, dev *manifest.Device, revision string) (planner.Desired, error) {
	r.renders++
	a, err := applier.New(r.cfg)
	if err != nil {
		return planner.Desired{}, err
	}
	return a.Desired(ctx, dev, revision)
}

// observedFrom makes base the node's state: every base resource exists as
// declared, was applied so and created by tend, so what changes in Git is
// an update and what is no longer declared is deleted.
func observedFrom(base planner.Desired) planner.Observed {
	obs := planner.Observed{
		Resources: make(map[string]planner.State, len(base.Resources)),
		Applied:   make(map[string][]planner.Field, len(base.Resources)),
		Created:   make(map[string]bool, len(base.Resources)),
	}
	for _, r := range base.Resources {
		obs.Resources[r.ID] = planner.State{Exists: true, Fields: r.Fields}
		obs.Applied[r.ID] = r.Fields
		obs.Created[r.ID] = true
	}
	return obs
}
