package diff

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	git "github.com/go-git/go-git/v5"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
	"github.com/tend-dev/tend/source"
)

// Options say where the devices are in the repo and how to render them.
type Options struct {
	// Path is the folder of a device's manifests, as source.path: with
	// path targeting a pattern in which {device} stands for the device's
	// name (one path segment) and {label:KEY} for any one segment; with
	// branch targeting the folder in each device's branch ("" for its
	// root).
	Path string
	// Paths, when set, are source.paths and Path is not used: at most
	// one may contain {device}, and is then the device folder as Path
	// is; every other one is a shared path, read for every device
	// besides its folder. A change of a shared path changes every
	// device. With no {device} in any, the first is the device folder
	// of each device branch (--ref with {device}).
	Paths []string
	// Ref is source.ref. When it contains {device} it is the pattern of
	// the device branches (branch targeting); otherwise it is not used.
	Ref string
	// Resolve resolves every model ref and container image in its
	// registry (tags to digests, sizes from the manifests); otherwise
	// models and images are compared by their declaration and no
	// registry is asked.
	Resolve  bool
	Registry transport.Options
	// Verify, with Resolve, is models.verify of the agents: every
	// model's digest must carry the signatures it and the model's own
	// verify ask for, checked in the registry as a device checks them
	// (the key and trusted root files are read on this machine).
	Verify *manifest.ArtifactVerify
	// ImageVerify, with Resolve, is runtime.verify of the agents: the
	// image digest of every container service must carry the signatures
	// it and the service's own verify ask for, checked as Verify is.
	ImageVerify *manifest.ArtifactVerify
	// AllowEmpty is the agents' allowEmpty: without it, a device whose
	// head declares nothing while its base declared something is an
	// error, as the agent refuses such a commit.
	AllowEmpty bool
	// AllowPaths, when set, are checked as the agents check them.
	AllowPaths []string
	// Diff sets the diff of every update: file content and spec fields,
	// base against head (see planner.ContentDiff).
	Diff   bool
	Logger *slog.Logger
}

// Status says what a change does to a device.
type Status string

// Statuses of a device in a diff.
const (
	Added   Status = "added"   // not at base, at head
	Removed Status = "removed" // at base, not at head: everything is deleted
	Changed Status = "changed" // at both, with actions
	Failed  Status = "error"   // cannot be planned: invalid at head, a model not found, …
)

// Revision is a revision as the user named it and the commit it is.
// Commit is empty with branch targeting, where every device has its own.
type Revision struct {
	Name   string `json:"name"`
	Commit string `json:"commit,omitempty"`
}

// Device is what the change does to one device.
type Device struct {
	Name   string
	Status Status
	Path   string             // folder at head, or at base for a removed device
	Plan   *planner.Changeset // nil when Status is Failed
	Err    error              // set when Status is Failed
	// Profiles says whether a profile applies to the device at base or
	// head: text and markdown then name the layer of each action.
	Profiles bool
	// Note says why the plan may not be what the device will do: its
	// manifests did not render at base, so the plan is against an empty
	// device.
	Note string
	// Rollout is when the device takes the change, under the Rollout at
	// head that governs it; nil without one (it takes the change at its
	// next tick) or when the change does nothing to the device.
	Rollout *DeviceRollout
}

// Result is a diff of the whole fleet.
type Result struct {
	Base, Head Revision
	// Devices are the devices that change or cannot be planned, by name.
	Devices []Device
	// Unchanged counts the devices the change leaves alone.
	Unchanged int
	// Rendered counts the devices whose manifests were read and rendered:
	// those whose folder's tree differs between base and head. It is the
	// cost of the diff, linear in what changed.
	Rendered int
	// Resolved is set when model refs were resolved in their registries.
	Resolved bool
	// shared are the shared paths at base and head, with path targeting
	// when they are apart from the device folders.
	shared [2]*location
	// Profiles are the profiles of the shared source paths that differ
	// between base and head, by name, with the devices each reaches.
	Profiles []ProfileChange
	// Rollouts are the Rollout documents that differ between base and
	// head, by name, with the devices each governs.
	Rollouts []RolloutChange
	// Empty names the devices whose manifests at head render to nothing:
	// no models, files or services.
	Empty []string
	// paths are the source paths (Path, Paths), for the warning about
	// Empty.
	paths Options
}

// Changes reports whether the change does anything to any device, or
// changes a rollout (when devices take their next release).
func (r *Result) Changes() bool {
	if len(r.Rollouts) > 0 {
		return true
	}
	for _, d := range r.Devices {
		if d.Status != Failed {
			return true
		}
	}
	return false
}

// Errors returns the devices that cannot be planned.
func (r *Result) Errors() []Device {
	var out []Device
	for _, d := range r.Devices {
		if d.Status == Failed {
			out = append(out, d)
		}
	}
	return out
}

// Log keys.
const (
	logKeyDevice   = "device"
	logKeyStatus   = "status"
	logKeyDevices  = "devices"
	logKeyChanged  = "changed"
	logKeyRendered = "rendered"
)

// Run computes what merging head into base does to every device of repo.
// Devices whose folder has the same tree at both revisions are counted as
// unchanged without reading their files. Errors about one device (invalid
// at head, a model ref not found) are in its Device; Run fails only for
// what stops the whole diff (a revision or pattern that cannot be used).
func Run(ctx context.Context, repo *git.Repository, base, head string, opts Options) (*Result, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	targets, res, err := discover(repo, base, head, opts, false)
	if err != nil {
		return nil, err
	}
	res.Resolved = opts.Resolve
	r := newRenderer(opts)
	r.reader = newReader(repo)
	reach := newReach()
	if err := reach.compareShared(r.reader, res.shared); err != nil {
		return nil, err
	}
	rollouts := newRolloutTracker()
	var sharedAt [2]*sharedSet
	for i, loc := range res.shared {
		if loc != nil && loc.sharedPresent() {
			if sharedAt[i], err = r.reader.sharedAt(loc); err != nil {
				return nil, err
			}
		}
	}
	rollouts.compareShared(sharedAt[0], sharedAt[1])
	for _, t := range targets {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if t.err != nil {
			res.Devices = append(res.Devices, Device{Name: t.name, Status: Failed, Err: t.err, Path: t.path()})
			continue
		}
		if t.base != nil && t.head != nil && t.base.same(t.head) {
			res.Unchanged++
			continue
		}
		res.Rendered++
		d, seen, listed, err := r.device(ctx, t, opts)
		if err != nil {
			return nil, err
		}
		log.DebugContext(ctx, "device rendered", logKeyDevice, t.name, logKeyStatus, string(d.Status))
		if listed {
			res.Devices = append(res.Devices, d)
		} else if d.Name != "" {
			res.Unchanged++
		}
		if d.Name != "" {
			reach.add(d, seen, listed)
			rollouts.add(d.Name, seen.baseIn, seen.headIn, sharedAt[0], sharedAt[1], seen)
			if seen.empty {
				res.Empty = append(res.Empty, d.Name)
			}
		}
	}
	res.Profiles = reach.result()
	res.Rollouts = rollouts.result()
	res.paths = Options{Path: opts.Path, Paths: opts.Paths}
	log.DebugContext(ctx, "diff", logKeyDevices, len(res.Devices)+res.Unchanged, logKeyChanged, len(res.Devices), logKeyRendered, res.Rendered)
	return res, nil
}

// device renders one device at base and head and plans the change. listed
// is false when the change does nothing to the device; a zero Device then
// means the folder holds no manifests at either revision (not a device).
// err is only for a cancelled context.
func (r *renderer) device(ctx context.Context, t target, opts Options) (d Device, seen layersSeen, listed bool, err error) {
	d = Device{Name: t.name, Path: t.path()}
	fail := func(err error) (Device, layersSeen, bool, error) {
		if ctx.Err() != nil {
			return Device{}, seen, false, ctx.Err()
		}
		d.Status, d.Err, d.Plan = Failed, err, nil
		return d, seen, true, nil
	}
	baseIn, err := r.reader.read(t.base)
	if err != nil {
		return fail(err)
	}
	headIn, err := r.reader.read(t.head)
	if err != nil {
		return fail(err)
	}
	seen.base, seen.head = baseIn.sharedSet(), headIn.sharedSet()
	seen.baseIn, seen.headIn = baseIn, headIn
	switch {
	case baseIn.empty() && headIn.empty():
		return Device{}, seen, false, nil
	case baseIn.empty():
		d.Status = Added
	case headIn.empty():
		d.Status, d.Path = Removed, t.base.Path
	default:
		d.Status = Changed
	}

	observed := planner.Observed{}
	var base *render.Desired
	if !baseIn.empty() {
		rev := revisionString(t.baseRev)
		c, err := compose(t.name, baseIn, opts.AllowPaths)
		var desired *render.Desired
		if err == nil {
			seen.baseComposed = c
			desired, err = r.desired(ctx, c.Device, rev)
		}
		base = desired
		if ctx.Err() != nil {
			return Device{}, seen, false, ctx.Err()
		}
		if err != nil {
			d.Note = fmt.Sprintf("does not render at base %s, so this plan is against an empty device: %v", rev, oneLine(err))
		}
		observed = observedFrom(desired)
	}

	rev := revisionString(t.headRev)
	if headIn.empty() {
		// The agent of a device with no manifests fails ("no manifests for
		// device") and keeps its last applied state: nothing is deleted.
		d.Plan = &planner.Changeset{Device: t.name, Revision: rev}
		d.Note = "no manifests at head: this device's agent will fail each tick with \"no manifests for device\" and keep " +
			"its last applied state; nothing on it is deleted. To clear it first, commit it declaring nothing with allowEmpty."
		return d, seen, true, nil
	}
	c, err := compose(t.name, headIn, opts.AllowPaths)
	if err != nil {
		return fail(fmt.Errorf("invalid manifests for device %s at %s:\n%w", t.name, rev, err))
	}
	seen.headComposed = c
	seen.empty = declaresNothing(c.Device)
	desired, err := r.desired(ctx, c.Device, rev)
	if err != nil {
		return fail(fmt.Errorf("device %s at %s: %w", t.name, rev, err))
	}
	allowEmpty := opts.AllowEmpty
	cs, err := planner.Plan(desired.Desired, observed, planner.Options{AllowEmpty: allowEmpty})
	if err != nil {
		return fail(err)
	}
	if !opts.Resolve {
		nameRefs(cs)
	} else {
		r.reword(cs, base, desired)
	}
	if opts.Diff {
		addDiffs(cs, base, desired, opts.Resolve)
	}
	setOrigins(cs, seen.baseComposed, seen.headComposed)
	d.Plan = cs
	d.Profiles = seen.profileLayers()
	d.Rollout = deviceRollout(d, c)
	return d, seen, d.Status != Changed || !cs.Empty() || d.Note != "", nil
}

// declaresNothing reports whether a composed device has no models, files
// or services.
func declaresNothing(d *manifest.Device) bool {
	return d != nil && len(d.Spec.Models) == 0 && len(d.Spec.Files) == 0 && len(d.Spec.Services) == 0
}

// nameRefs says what changes about an unresolved model: its ref (the
// field the planner calls digest holds the ref as declared).
func nameRefs(cs *planner.Changeset) {
	for i, a := range cs.Actions {
		if a.Kind == planner.KindModel && a.Type == planner.Update && len(a.Changes) == 1 && !a.IsDrift() {
			cs.Actions[i].Reason = "update: ref " + a.Changes[0].From + " → " + a.Changes[0].To
		}
	}
}

// revisionString names a revision as plans print it: name@sha1:commit.
func revisionString(r Revision) string {
	if r.Commit == "" {
		return r.Name
	}
	return source.Revision{Ref: r.Name, Commit: r.Commit}.String()
}

// oneLine joins the lines of an error's message.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
