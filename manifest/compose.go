package manifest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ComposeOptions say which device to compose, with what it knows of itself.
type ComposeOptions struct {
	Device string            // the device's name
	Labels map[string]string // the agent config's labels; the Device documents' labels win
	ValidateOptions
}

// Composed is the desired state of one device and how it was made: which
// layers applied, and where every resource, variable and label came from.
type Composed struct {
	Device    *Device
	Labels    []Label      // by key
	Layers    []Layer      // in the order they applied
	Resources []Provenance // by id, removed ones included
	Vars      []Provenance // by id (var/NAME)
	// Warnings are what is suspect but not invalid, by file and line:
	// an absent: true with nothing to remove, a ${…} that looks like a
	// mistyped expansion. Device.Warnings holds them too.
	Warnings []*Error
	// Rollout is the rollout that governs the device, or nil: a release
	// is then taken at once.
	Rollout *Rollout
}

// Layer is one document that applied to the device.
type Layer struct {
	Kind     string // Profile or Device
	Name     string
	Priority int // a profile's
	File     string
	Line     int
}

// ID is the layer's name as explain prints it: profile/NAME or device/NAME.
func (l Layer) ID() string { return strings.ToLower(l.Kind) + "/" + l.Name }

// Source is where a value came from: a layer and the file:line of the
// value, or the agent config.
type Source struct {
	Layer string // profile/NAME, device/NAME or "agent config"
	File  string
	Line  int
}

func (s Source) String() string {
	if s.File == "" {
		return s.Layer
	}
	return fmt.Sprintf("%s (%s:%d)", s.Layer, s.File, s.Line)
}

// Provenance is where a resource or variable of the result came from and
// which earlier layers it overrode, first to last.
type Provenance struct {
	ID       string // model/NAME, file/PATH, service/NAME or var/NAME
	From     Source
	Overrode []Source
	Removed  bool // From set absent: true
}

// Label is one label of the device and where it came from.
type Label struct {
	Key, Value string
	From       Source
	// ConfigValue is the agent config's value that a Device document
	// overrode with a different one (Overridden is then true).
	ConfigValue string
	Overridden  bool
}

// agentConfig is the Source of a label from the agent config.
var agentConfig = Source{Layer: "agent config"}

// Compose parses inputs and merges into the desired state of opts.Device
// every layer that applies to it: the profiles its labels select, by
// priority then name, and its Device documents last. The result is
// expanded (${var:NAME}, ${device}, ${label:KEY}) and validated; every
// problem is reported, at the file and line of the layer it is in.
func Compose(inputs []Input, opts ComposeOptions) (*Composed, error) {
	set, errs := parse(inputs, opts.Device)
	if len(errs) > 0 {
		return nil, errs
	}
	return set.composeValid(opts, len(inputs))
}

// composeValid composes opts.Device as compose does and validates the
// result.
func (set parsedSet) composeValid(opts ComposeOptions, files int) (*Composed, error) {
	c, err := set.compose(opts, files)
	if err != nil {
		return nil, err
	}
	if err := c.Device.Validate(opts.ValidateOptions); err != nil {
		return nil, c.fail(opts.Device, c.Device.Metadata.Labels, err.(Errors))
	}
	return c, nil
}

// compose merges the layers of set that apply to opts.Device and expands
// the result; it does not validate it.
func (set parsedSet) compose(opts ComposeOptions, files int) (*Composed, error) {
	var docs []parsed
	for _, d := range set.devices {
		if d.dev.Metadata.Name == opts.Device {
			docs = append(docs, d)
		}
	}
	c := &Composed{}
	labels, errs := c.mergeLabels(opts.Labels, docs)
	if len(errs) > 0 {
		return nil, errs
	}
	layers := set.layers(opts.Device, labels, docs)
	for _, l := range layers {
		c.Layers = append(c.Layers, l.docs...)
	}
	c.Rollout, errs = set.rollout(opts.Device, labels)
	if len(errs) > 0 {
		return nil, c.fail(opts.Device, labels, errs)
	}
	if len(layers) == 0 {
		return nil, Errors{{Msg: fmt.Sprintf("no Device document for %q and no profile matches its labels (%s) in %d manifest files (%d profiles): "+
			"add a Device document for it, or give it the labels a profile selects", opts.Device, labelList(labels), files, len(set.profiles))}}
	}
	errs = append(errs, checkKeys(layers)...)
	errs = append(errs, checkTies(layers)...)
	vars := c.mergeVars(layers)
	m := c.mergeResources(layers, &errs)
	if len(errs) > 0 {
		return nil, c.fail(opts.Device, labels, errs)
	}
	x := newExpander(opts.Device, labels, vars)
	c.Device = &Device{APIVersion: APIVersion, Kind: KindDevice, Metadata: Metadata{Name: opts.Device}}
	if len(labels) > 0 {
		c.Device.Metadata.Labels = labels
	}
	m.build(c.Device, x)
	errs = append(errs, *x.errs...)
	c.Warnings = append(c.Warnings, x.warnings...)
	sortErrors(c.Warnings)
	c.Device.Warnings = c.Warnings
	if len(errs) > 0 {
		return nil, c.fail(opts.Device, labels, errs)
	}
	return c, nil
}

// ComposeError is every problem found composing one device (Errs, by
// file and line), with what was known of the device: its labels, the
// profiles they select and the warnings found so far. Its text is that
// of Errs, and it unwraps to Errs.
type ComposeError struct {
	Device   string
	Labels   map[string]string
	Profiles []string // profile/NAME, in the order they apply
	Warnings []*Error // see Composed.Warnings
	Errs     Errors
}

func (e *ComposeError) Error() string { return e.Errs.Error() }

// Unwrap returns Errs.
func (e *ComposeError) Unwrap() error { return e.Errs }

// fail returns errs, sorted, as the ComposeError of device.
func (c *Composed) fail(device string, labels map[string]string, errs Errors) error {
	sortErrors(errs)
	return &ComposeError{Device: device, Labels: labels, Profiles: ProfileIDs(c.Layers), Warnings: uncovered(c.Warnings, errs), Errs: errs}
}

// uncovered returns warnings, sorted, without those at the field of one
// of errs: an error says more (a ${batch} in a command is refused, not
// left as it is).
func uncovered(warnings []*Error, errs Errors) []*Error {
	at := map[Error]bool{}
	for _, e := range errs {
		at[Error{File: e.File, Line: e.Line, Field: e.Field}] = true
	}
	var out []*Error
	for _, w := range warnings {
		if !at[Error{File: w.File, Line: w.Line, Field: w.Field}] {
			out = append(out, w)
		}
	}
	sortErrors(out)
	return out
}

// AsErrors returns the problems err holds, one by one: those of Errors
// or a ComposeError, or nil for another error.
func AsErrors(err error) Errors {
	var errs Errors
	if errors.As(err, &errs) {
		return errs
	}
	return nil
}

// mergeLabels overlays the Device documents' labels on the agent config's,
// recording where each came from; two Device documents that disagree on a
// label are an error.
func (c *Composed) mergeLabels(config map[string]string, docs []parsed) (map[string]string, Errors) {
	labels := map[string]string{}
	from := map[string]Label{}
	for k, v := range config {
		labels[k] = v
		from[k] = Label{Key: k, Value: v, From: agentConfig}
	}
	var errs Errors
	for _, d := range docs {
		for _, k := range sortedKeys(d.dev.Metadata.Labels) {
			v := d.dev.Metadata.Labels[k]
			field := "metadata.labels." + k
			prev, seen := from[k]
			if seen && prev.From != agentConfig && prev.Value != v {
				errs.add(d.info.file, lineOf(d.info, field, d.info.line), field,
					"label %s is %q here but %q in %s", k, v, prev.Value, prev.From.File)
				continue
			}
			if seen && prev.From != agentConfig {
				continue
			}
			l := Label{Key: k, Value: v, From: Source{Layer: "device/" + d.dev.Metadata.Name, File: d.info.file, Line: lineOf(d.info, field, d.info.line)}}
			if seen && prev.Value != v {
				l.ConfigValue, l.Overridden = prev.Value, true
			}
			labels[k], from[k] = v, l
		}
	}
	for _, k := range sortedKeys(from) {
		c.Labels = append(c.Labels, from[k])
	}
	return labels, errs
}

func labelList(labels map[string]string) string {
	if len(labels) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(labels) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ", ")
}

// layer is one step of the merge: a profile, or every Device document of
// the device together.
type layer struct {
	id       string // profile/NAME or device/NAME
	profile  bool
	priority int
	docs     []Layer
	entries  []entry
	vars     []entry
}

// entry is one item of a layer: a resource or a variable.
type entry struct {
	id     string // model/NAME, file/PATH, service/NAME or var/NAME
	absent bool
	value  any // Model, File or Service with its Origin; string for a var
	origin Origin
	from   Source
}

// layers returns the layers that apply to device, in merge order.
func (set parsedSet) layers(device string, labels map[string]string, docs []parsed) []*layer {
	var out []*layer
	for _, p := range set.profiles {
		if p.prof.Spec.Selector.Matches(labels) {
			out = append(out, p.layer())
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].priority < out[j].priority })
	if len(docs) > 0 {
		l := &layer{id: "device/" + device}
		for _, d := range docs {
			l.docs = append(l.docs, Layer{Kind: KindDevice, Name: device, File: d.info.file, Line: d.info.line})
			l.addResources(d.info, d.dev.Spec.Models, d.dev.Spec.Files, d.dev.Spec.Services)
		}
		out = append(out, l)
	}
	return out
}

// layer is the layer of profile p.
func (p parsedProfile) layer() *layer {
	l := &layer{id: "profile/" + p.prof.Metadata.Name, profile: true, priority: p.prof.Spec.Priority}
	l.docs = []Layer{{Kind: KindProfile, Name: p.prof.Metadata.Name, Priority: p.prof.Spec.Priority, File: p.info.file, Line: p.info.line}}
	spec := p.prof.Spec
	l.addResources(p.info, spec.Models, spec.Files, spec.Services)
	for _, k := range sortedKeys(spec.Vars) {
		field := "spec.vars." + k
		o := origin(p.info, field)
		l.vars = append(l.vars, entry{id: "var/" + k, value: spec.Vars[k], origin: o,
			from: Source{Layer: l.id, File: o.File, Line: o.Line("")}})
	}
	return l
}

func (l *layer) addResources(info *document, models []Model, files []File, services []Service) {
	add := func(id string, absent bool, value any, o Origin) {
		l.entries = append(l.entries, entry{id: id, absent: absent, value: value, origin: o,
			from: Source{Layer: l.id, File: o.File, Line: o.Line("")}})
	}
	for i, m := range models {
		m.Origin = origin(info, fmt.Sprintf("spec.models[%d]", i))
		add("model/"+m.Name, m.Absent, m, m.Origin)
	}
	for i, f := range files {
		f.Origin = origin(info, fmt.Sprintf("spec.files[%d]", i))
		add("file"+f.Path, f.Absent, f, f.Origin)
	}
	for i, s := range services {
		s.Origin = origin(info, fmt.Sprintf("spec.services[%d]", i))
		add("service/"+s.Name, s.Absent, s, s.Origin)
	}
}

// checkKeys refuses a variable in a merge key (a model's or service's
// name, a file's path): layers are merged by key before variables are
// expanded, so /etc/infer/${device}.yaml in a profile and the same file
// spelt out in a Device document would be two items, not one override.
func checkKeys(layers []*layer) Errors {
	var errs Errors
	for _, l := range layers {
		for _, e := range l.entries {
			if strings.Contains(e.id, "${var:") || strings.Contains(e.id, "${device}") || strings.Contains(e.id, "${label:") {
				field := keyField(e.id)
				errs.add(e.origin.File, e.origin.Line(strings.TrimPrefix(field, ".")), e.origin.Field+field,
					"%s: a variable in a %s is not supported: layers are merged by it before variables are expanded; write it out (a per-device file goes in the Device document)",
					e.id, strings.TrimPrefix(field, "."))
			}
		}
	}
	return errs
}

// keyField is the field of an entry's key, for errors.
func keyField(id string) string {
	switch {
	case strings.HasPrefix(id, "var/"):
		return ""
	case strings.HasPrefix(id, "file"):
		return ".path"
	}
	return ".name"
}

func sortErrors(errs Errors) {
	sort.SliceStable(errs, func(i, j int) bool {
		if errs[i].File != errs[j].File {
			return errs[i].File < errs[j].File
		}
		return errs[i].Line < errs[j].Line
	})
}
