package diff

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	git "github.com/go-git/go-git/v5"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/render"
)

// Checked is one device as Validate found it.
type Checked struct {
	Name     string
	Path     string
	Revision string           // name@sha1:commit
	Device   *manifest.Device // nil when Err is set
	Err      error
	// Profiles are the profiles that apply to the device, by layer id.
	Profiles []string
	// Warning, when set, says what is valid but likely not meant: the
	// device renders to nothing (no models, files or services).
	Warning string
}

// Validate checks the manifests of every device found at rev, with the
// discovery of Run (with branch targeting rev may contain {device}, and is
// then each device's branch). With opts.Resolve every model ref and
// container image is resolved in its registry, each distinct ref once,
// and its signatures checked. A device's problems
// are in its Checked, every one of them with file and field; Validate
// fails only for what stops the whole check.
func Validate(ctx context.Context, repo *git.Repository, rev string, opts Options) ([]Checked, error) {
	targets, _, err := discover(repo, rev, rev, opts, true)
	if err != nil {
		return nil, err
	}
	if targets, err = addFolderDevices(repo, rev, opts, targets); err != nil {
		return nil, err
	}
	var out []Checked
	r := newReader(repo)
	for _, t := range targets {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := Checked{Name: t.name, Path: t.path(), Revision: revisionString(t.headRev), Err: t.err}
		// With a branch per device the branch names the device: one
		// without manifests fails on the device ("no manifests for
		// device"), so it is invalid here too. With a path per device, a
		// folder without manifests is not a device.
		perBranch := t.branch
		missing := fmt.Errorf("no manifests for device %s at %s in %s: the agent would fail; add them or delete the branch",
			t.name, displayPatterns(opts), revisionString(t.headRev))
		if t.err == nil && t.head == nil {
			if !perBranch {
				continue
			}
			c.Err = missing
			out = append(out, c)
			continue
		}
		if t.err == nil {
			in, err := r.read(t.head)
			if err == nil && in.empty() {
				if !perBranch {
					continue // a folder without manifests is not a device
				}
				err = missing
			}
			var composed *manifest.Composed
			if err == nil {
				composed, err = compose(t.name, in, opts.AllowPaths)
			}
			if err == nil {
				c.Device = composed.Device
				if declaresNothing(composed.Device) {
					c.Warning = emptyWarning(opts)
				}
				for _, l := range composed.Layers {
					if l.Kind == manifest.KindProfile {
						c.Profiles = append(c.Profiles, l.ID())
					}
				}
			}
			if err != nil {
				c.Device, c.Err = nil, err
			}
		}
		out = append(out, c)
	}
	if opts.Resolve {
		if err := resolveAll(ctx, out, opts); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// addFolderDevices adds, to the device branches of a check of every
// branch (rev holds {device}) whose path also holds {device}, the devices
// that are folders of HEAD, the default branch, and have no branch of their
// own: a fleet may keep some devices in folders of the main branch and
// others on branches of their own. A device with both is checked on its
// branch, which is what an agent with a branch pattern reads.
func addFolderDevices(repo *git.Repository, rev string, opts Options, branches []target) ([]target, error) {
	src, err := parseSources(opts)
	if err != nil {
		return nil, err
	}
	if !perDevice(rev) || !src.device.device {
		return branches, nil
	}
	folders, _, err := discoverPaths(repo, "HEAD", "HEAD", src, true)
	if errors.Is(err, ErrUnknownRevision) {
		return branches, nil // no default branch: nothing but device branches
	}
	if err != nil {
		return nil, err
	}
	has := map[string]bool{}
	for _, t := range branches {
		has[t.name] = true
	}
	out := branches
	for _, t := range folders {
		if !has[t.name] {
			out = append(out, t)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// partialTag warns when m's semver policy resolved to a tag that does not
// spell MAJOR.MINOR.PATCH (see transport.FullVersion), such as v3: the policy
// reads it as 3.0.0, so that it outranks 2.9.1 and a later 3.0.0 alike,
// and such a tag is often moved to each new release of its line.
func partialTag(m manifest.Model, res render.Resolution) *manifest.Error {
	if m.Policy == nil || res.Tag == "" || transport.FullVersion(res.Tag) {
		return nil
	}
	read, example := "a version", "1.3.0"
	if v, err := semver.NewVersion(res.Tag); err == nil { // it matched the policy
		read, example = v.String(), v.String()
		if strings.HasPrefix(res.Tag, "v") {
			example = "v" + example
		}
	}
	const field = ".policy.semver"
	return &manifest.Error{File: m.Origin.File, Line: m.Origin.Line(field), Field: m.Origin.Field + field,
		Msg: fmt.Sprintf("model %s: semver policy %q resolves to tag %s, which is no full MAJOR.MINOR.PATCH version (the policy reads it as %s, and such a tag is often moved to each release of its line); push full MAJOR.MINOR.PATCH tags such as %s",
			m.Name, m.Policy.Semver, res.Tag, read, example)}
}

// resolveAll resolves every distinct model ref and container image of the
// valid devices once, and marks the devices whose refs are not found or
// not signed as required invalid, naming the file, the field and the ref.
func resolveAll(ctx context.Context, devices []Checked, opts Options) error {
	resolver := verifying(&render.Registry{Options: opts.Registry}, opts)
	for i := range devices {
		d := &devices[i]
		if d.Device == nil {
			continue
		}
		var errs manifest.Errors
		for _, m := range d.Device.Spec.Models {
			res, err := resolver.Resolve(ctx, m)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if w := partialTag(m, res); w != nil {
				d.Device.Warnings = append(d.Device.Warnings, w)
			}
			if err != nil {
				field := ".ref"
				if errors.Is(err, modelkit.ErrIncludeMatchesNothing) {
					field = ".include"
				}
				errs = append(errs, &manifest.Error{File: m.Origin.File, Line: m.Origin.Line(field), Field: m.Origin.Field + field,
					Msg: fmt.Sprintf("model %s: %v", m.Name, err)})
			}
		}
		for _, s := range d.Device.Spec.Services {
			if !s.Container() {
				continue
			}
			_, err := resolver.ResolveServiceImage(ctx, s)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				errs = append(errs, &manifest.Error{File: s.Origin.File, Line: s.Origin.Line(".image"), Field: s.Origin.Field + ".image",
					Msg: fmt.Sprintf("service %s: image %s: %v", s.Name, s.Image, err)})
			}
		}
		if len(errs) > 0 {
			d.Device, d.Err = nil, errs
		}
	}
	return nil
}
