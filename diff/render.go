package diff

import (
	"context"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

func displayPath(p string) string {
	if p == "" {
		return "the repo root"
	}
	return p
}

// renderer renders devices without a node: under root "/" with the
// default stateDir (so a service's spec, which holds the paths of the
// models it uses, is the same at base and head when its declaration is),
// every path allowed unless AllowPaths are given, and models planned by
// their declaration, or resolved in their registries (tags to digests,
// sizes from the manifests; no layer is downloaded).
type renderer struct {
	opts     render.Options
	registry *render.Registry // with Resolve
	reader   *reader
}

func newRenderer(opts Options) *renderer {
	var resolver render.Resolver = render.Declared{}
	var reg *render.Registry
	if opts.Resolve {
		reg = &render.Registry{Options: opts.Registry, Sizes: true}
		resolver = verifying(reg, opts)
	}
	return &renderer{opts: render.Options{AllowPaths: opts.AllowPaths, CheckAllowPaths: len(opts.AllowPaths) > 0, Resolver: resolver}, registry: reg}
}

// compose composes device from what was read of it, with its labels in
// Git only: CI knows no agent config's labels.
func compose(device string, in *inputs, allow []string) (*manifest.Composed, error) {
	opts := manifest.ComposeOptions{Device: device, ValidateOptions: manifest.ValidateOptions{AllowPaths: allow, CheckAllowPaths: len(allow) > 0}}
	if in.shared != nil {
		return in.shared.parsed.Compose(in.own, opts)
	}
	return manifest.Compose(in.own, opts)
}

// reword says what a resolved model's update changes as a device's plan
// does: from the version at base, with what pulling it costs a device
// that holds the base version (the layers it lacks).
func (r *renderer) reword(cs *planner.Changeset, base, head *render.Desired) {
	if r.registry == nil || base == nil {
		return
	}
	for i, a := range cs.Actions {
		if a.Kind != planner.KindModel || a.Type != planner.Update || a.IsDrift() {
			continue
		}
		name := planner.ModelName(a.Resource)
		was, ok := base.Model(name)
		now, ok2 := head.Model(name)
		if !ok || !ok2 {
			continue
		}
		download, ok := r.registry.Missing(now.Digest, was.Digest)
		if !ok {
			download = -1
		}
		active := &render.Active{Ref: was.Ref, Policy: was.Policy, Digest: was.Digest, Tag: was.Tag}
		cs.Actions[i].Reason = "update: " + render.ModelReason(now, active, download)
	}
}

// desired returns what dev declares at revision, as the planner compares
// it.
func (r *renderer) desired(ctx context.Context, dev *manifest.Device, revision string) (*render.Desired, error) {
	return render.Render(ctx, dev, revision, r.opts)
}

// observedFrom makes base the node's state: every base resource exists as
// declared, was applied so and created by tend, so what changes in Git is
// an update and what is no longer declared is deleted.
func observedFrom(base *render.Desired) planner.Observed {
	if base == nil {
		return planner.Observed{}
	}
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
