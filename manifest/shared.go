package manifest

import (
	"bytes"
	"sort"

	yaml3 "go.yaml.in/yaml/v3"
)

// Shared is a set of manifest files read with the files of every device
// (the shared source paths of a fleet), parsed once: composing 10,000
// devices with the same 100 profiles decodes each profile once, not 10,000
// times. Shared.Compose(own, opts) is Compose(own + shared, opts).
type Shared struct {
	profiles []parsedProfile
	rollouts []parsedRollout
	devices  map[string][]sharedDoc // Device documents of profile files, by metadata.name
	others   []Input                // files without a profile: parsed per device, as Compose does
	errs     Errors                 // of the profile files: every device has them
	files    int
}

// sharedDoc is a Device document of a file that also holds profiles,
// decoded for the device it names only.
type sharedDoc struct {
	in  Input
	doc *yaml3.Node
}

// ParseShared parses inputs, files read with every device's own.
func ParseShared(inputs []Input) *Shared {
	sorted := append([]Input(nil), inputs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	s := &Shared{devices: map[string][]sharedDoc{}, files: len(inputs)}
	var set parsedSet
	for _, in := range sorted {
		if in.PerDevice || !holdsFleetDoc(in.Data) {
			s.others = append(s.others, in)
			continue
		}
		if err := CheckSize(in.Name, int64(len(in.Data))); err != nil {
			s.errs = append(s.errs, err.(*Error))
			continue
		}
		docs, err := splitDocuments(in.Name, in.Data)
		if err != nil {
			s.errs = append(s.errs, err.(*Error))
		}
		for _, doc := range docs {
			if set.parseFleetDoc(in, doc, &s.errs) {
				name := metadataName(doc)
				s.devices[name] = append(s.devices[name], sharedDoc{in: in, doc: doc})
			}
		}
	}
	s.profiles, s.rollouts = set.profiles, set.rollouts
	return s
}

// Profiles returns the shared profiles that parsed, by name.
func (s *Shared) Profiles() []*Profile {
	out := make([]*Profile, len(s.profiles))
	for i := range s.profiles {
		out[i] = &s.profiles[i].prof
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Metadata.Name < out[j].Metadata.Name })
	return out
}

// Rollouts returns the shared rollouts that parsed, by name.
func (s *Shared) Rollouts() []*Rollout {
	out := make([]*Rollout, len(s.rollouts))
	for i := range s.rollouts {
		out[i] = &s.rollouts[i].roll
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Metadata.Name < out[j].Metadata.Name })
	return out
}

// Err returns the problems of the shared files that every device has:
// those of the files holding profiles, and two profiles of one name.
func (s *Shared) Err() error {
	set := parsedSet{profiles: append([]parsedProfile(nil), s.profiles...), rollouts: append([]parsedRollout(nil), s.rollouts...)}
	errs := append(append(Errors(nil), s.errs...), set.checkNames()...)
	sortErrors(errs)
	return errs.err()
}

// Compose composes opts.Device from its own inputs and the shared ones, as
// Compose does from both together.
func (s *Shared) Compose(own []Input, opts ComposeOptions) (*Composed, error) {
	var set parsedSet
	errs := set.add(append(own[:len(own):len(own)], s.others...), opts.Device)
	for _, d := range s.devices[opts.Device] {
		set.parseDevice(d.in, d.doc, opts.Device, &errs)
	}
	errs = append(errs, s.errs...)
	set.profiles = append(set.profiles, s.profiles...)
	set.rollouts = append(set.rollouts, s.rollouts...)
	errs = append(errs, set.checkNames()...)
	if len(errs) > 0 {
		sortErrors(errs)
		return nil, errs
	}
	sort.SliceStable(set.devices, func(i, j int) bool { return set.devices[i].info.file < set.devices[j].info.file })
	return set.composeValid(opts, len(own)+s.files)
}

// holdsFleetDoc reports whether data may hold a Profile or Rollout
// document (see mayConcern).
func holdsFleetDoc(data []byte) bool {
	return bytes.Contains(data, []byte(KindProfile)) || bytes.Contains(data, []byte(KindRollout)) || bytes.IndexByte(data, '\\') >= 0
}
