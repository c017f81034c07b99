package manifest

// FleetCheck is what CheckFleet found in a set of manifest files: every
// device a Device document names, every profile and every rollout, each
// with the devices of the files it reaches.
type FleetCheck struct {
	Devices  []DeviceCheck  // by name
	Profiles []ProfileCheck // by name
	Rollouts []RolloutCheck // by name
}

// DeviceCheck is one device of the files, composed with the profiles its
// labels select.
type DeviceCheck struct {
	Name string
	// Labels are the labels of its Device documents: all that is known
	// of a device without its agent config.
	Labels   map[string]string
	Composed *Composed // nil when Err is set
	// Profiles are the profiles its labels select (profile/NAME, in the
	// order they apply), whether or not the device is valid.
	Profiles []string
	Err      error // every problem of the device, by file and line
}

// ProfileCheck is one profile of the files.
type ProfileCheck struct {
	Profile *Profile
	Devices []string // the devices of the files it applies to, by name
	// Alone is set when it applies to none of them: it was then checked
	// on its own (see CheckFleet), with Warnings and Err.
	Alone    bool
	Warnings []*Error
	Err      error
}

// RolloutCheck is one rollout of the files.
type RolloutCheck struct {
	Rollout *Rollout
	Devices []string // the devices of the files it governs, by name
}

// CheckFleet checks every document of inputs, as validating files
// without an agent does: each Profile and Rollout document (name,
// selector, variable names, waves, window, gate), and every device a
// Device document names, composed with the profiles its labels in the
// files select and validated with opts. A profile that applies to none
// of these devices is checked on its own, its resources as a device
// would hold them: every ${var:NAME} must be set by it or by another
// profile of the files; what only a device knows (its name, its labels,
// a variable that only other profiles set, the models and files of its
// other layers) is left unknown, and the fields that use it unchecked.
// The error is every problem of a document that did not parse or check;
// the problems of a device or profile are in its check.
func CheckFleet(inputs []Input, opts ValidateOptions) (*FleetCheck, error) {
	set, errs := parse(inputs, "")
	if len(errs) > 0 {
		sortErrors(errs)
		return nil, errs
	}
	out := &FleetCheck{}
	for _, name := range set.deviceNames() {
		c, err := set.composeValid(ComposeOptions{Device: name, ValidateOptions: opts}, len(inputs))
		d := DeviceCheck{Name: name, Labels: set.labels(name), Composed: c, Err: err}
		for _, l := range set.layers(name, d.Labels, nil) {
			d.Profiles = append(d.Profiles, l.id)
		}
		out.Devices = append(out.Devices, d)
	}
	for _, p := range set.profiles {
		pc := ProfileCheck{Profile: &p.prof}
		for _, d := range out.Devices {
			if p.prof.Spec.Selector.Matches(d.Labels) {
				pc.Devices = append(pc.Devices, d.Name)
			}
		}
		if len(pc.Devices) == 0 {
			pc.Alone = true
			pc.Warnings, pc.Err = set.checkAlone(p, opts)
		}
		out.Profiles = append(out.Profiles, pc)
	}
	for _, r := range set.rollouts {
		rc := RolloutCheck{Rollout: &r.roll}
		for _, d := range out.Devices {
			if r.roll.Spec.Selector.Matches(d.Labels) {
				rc.Devices = append(rc.Devices, d.Name)
			}
		}
		out.Rollouts = append(out.Rollouts, rc)
	}
	return out, nil
}

// labels returns the labels of device's Device documents in s, the first
// document's value winning where two disagree (composing the device
// reports that).
func (s parsedSet) labels(device string) map[string]string {
	out := map[string]string{}
	for _, d := range s.devices {
		if d.dev.Metadata.Name != device {
			continue
		}
		for k, v := range d.dev.Metadata.Labels {
			if _, seen := out[k]; !seen {
				out[k] = v
			}
		}
	}
	return out
}

// checkAlone checks profile p on its own (see CheckFleet) and returns its
// warnings and problems.
func (s parsedSet) checkAlone(p parsedProfile, opts ValidateOptions) ([]*Error, error) {
	layers := []*layer{p.layer()}
	errs := checkKeys(layers)
	c := &Composed{}
	vars := c.mergeVars(layers)
	m := c.mergeResources(layers, &errs)
	if len(errs) > 0 {
		sortErrors(errs)
		return nil, errs
	}
	// The variables other profiles set may reach a device with this one.
	others := map[string]bool{}
	for _, q := range s.profiles {
		for k := range q.prof.Spec.Vars {
			if _, own := vars[k]; !own {
				others[k] = true
			}
		}
	}
	x := newExpander("", nil, vars)
	x.loose = &looseRefs{others: others}
	d := &Device{APIVersion: APIVersion, Kind: KindDevice}
	m.build(d, x)
	errs = append(errs, *x.errs...)
	for _, e := range d.validate(opts, true) {
		if !x.skip[e.Field] {
			errs = append(errs, e)
		}
	}
	sortErrors(errs)
	return uncovered(x.warnings, errs), errs.err()
}

// ProfileIDs returns the ids (profile/NAME) of the profiles of layers.
func ProfileIDs(layers []Layer) []string {
	var out []string
	for _, l := range layers {
		if l.Kind == KindProfile {
			out = append(out, l.ID())
		}
	}
	return out
}
