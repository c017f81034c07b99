package manifest

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// MaxFileBytes bounds one manifest file: what is larger (say a big file
// content inline) would take the agent, validate or a CI diff gigabytes of
// memory to parse. Content that large belongs in a model artifact.
const MaxFileBytes = 1 << 20

// CheckSize refuses a manifest file of size bytes, named name, that is
// larger than MaxFileBytes, before it is read.
func CheckSize(name string, size int64) error {
	if size <= MaxFileBytes {
		return nil
	}
	return &Error{File: name, Msg: fmt.Sprintf("the file is %d bytes; a manifest file may be at most %d (1 MiB): "+
		"move large content into a model artifact, or split the file", size, MaxFileBytes)}
}

// Bounds of the manifest files read under one source path, each file
// charged by its size before it is read: Git stores a file once however many
// paths name it, so a small commit can name gigabytes of manifests.
const (
	MaxSourceFiles = 10_000
	MaxSourceBytes = 64 << 20
)

// ReadBudget counts the manifest files read under one source path
// against MaxSourceFiles and MaxSourceBytes.
type ReadBudget struct {
	files int
	bytes int64
}

// Take charges a file of size bytes named name, after CheckSize, or says
// which bound it would break.
func (b *ReadBudget) Take(name string, size int64) error {
	if err := CheckSize(name, size); err != nil {
		return err
	}
	b.files++
	b.bytes += size
	switch {
	case b.files > MaxSourceFiles:
		return &Error{File: name, Msg: fmt.Sprintf("more than %d manifest files under one source path; split the fleet's paths, or move content into model artifacts", MaxSourceFiles)}
	case b.bytes > MaxSourceBytes:
		return &Error{File: name, Msg: fmt.Sprintf("the manifest files under one source path add up to more than %d bytes (64 MiB) by this one; "+
			"the same content at many paths counts each time: move large content into model artifacts", MaxSourceBytes)}
	}
	return nil
}

// Input is one manifest file as read from the fleet repo.
type Input struct {
	Name      string // path in the repo, e.g. devices/cam-017/models.yaml
	Data      []byte
	PerDevice bool // read from a source path with {device}: a Device document there must name this device
}

// IsManifest reports whether a file, by its slash-separated path relative
// to the device's folder, is read as a manifest: *.yaml or *.yml, and not
// hidden (no path element starts with a dot, so .github/ is skipped).
func IsManifest(rel string) bool {
	for _, elem := range strings.Split(rel, "/") {
		if strings.HasPrefix(elem, ".") && elem != "." {
			return false
		}
	}
	ext := path.Ext(rel)
	return ext == ".yaml" || ext == ".yml"
}

// Load parses the documents of inputs, all read for device (a Device
// document there must name it, as if each input were PerDevice), and
// composes them with the profiles among them (with no labels but those of
// the Device documents). It reports every problem it finds, not just the
// first; it does not validate the resources (see Validate and Compose).
func Load(device string, inputs []Input) (*Device, error) {
	perDevice := make([]Input, len(inputs))
	for i, in := range inputs {
		in.PerDevice = true
		perDevice[i] = in
	}
	set, errs := parse(perDevice, device)
	if len(errs) > 0 {
		return nil, errs
	}
	c, err := set.compose(ComposeOptions{Device: device}, len(inputs))
	if err != nil {
		return nil, err
	}
	return c.Device, nil
}

// LoadAll composes every device that a Device document of inputs names,
// each with the profiles its labels in Git select, for checking manifests
// without an agent. Every profile is checked too (see LoadFleet).
func LoadAll(inputs []Input) (map[string]*Device, error) {
	f, err := LoadFleet(inputs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*Device, len(f.Devices))
	for name, c := range f.Devices {
		out[name] = c.Device
	}
	return out, nil
}

// Fleet is every device named by a Device document of a repo, composed
// with the profiles its labels in Git select, and every profile.
type Fleet struct {
	Devices  map[string]*Composed
	Profiles []*Profile // by name
}

// LoadFleet parses every document of inputs, checks every profile (its
// name, selector and variable names) and composes every device a Device
// document names; the resources are not validated (see Validate).
func LoadFleet(inputs []Input) (*Fleet, error) {
	set, errs := parse(inputs, "")
	if len(errs) > 0 {
		return nil, errs
	}
	f := &Fleet{Devices: map[string]*Composed{}}
	for _, p := range set.profiles {
		f.Profiles = append(f.Profiles, &p.prof)
	}
	for _, name := range set.deviceNames() {
		c, err := set.compose(ComposeOptions{Device: name}, len(inputs))
		if err != nil {
			errs = append(errs, AsErrors(err)...)
			continue
		}
		f.Devices[name] = c
	}
	return f, errs.err()
}

type parsed struct {
	dev       Device
	info      *document
	perDevice bool
}

type parsedProfile struct {
	prof Profile
	info *document
}

type parsedRollout struct {
	roll Rollout
	info *document
}

// parsedSet is every Device, Profile and Rollout document of a set of
// inputs.
type parsedSet struct {
	devices  []parsed
	profiles []parsedProfile // by name
	rollouts []parsedRollout // by name
}

func (s parsedSet) deviceNames() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range s.devices {
		if !seen[d.dev.Metadata.Name] {
			seen[d.dev.Metadata.Name] = true
			out = append(out, d.dev.Metadata.Name)
		}
	}
	sort.Strings(out)
	return out
}

// parse decodes every Device and Profile document of inputs, in file name
// order. With device set, a Device document naming another device is not
// decoded unless its input is PerDevice (it is then an error): it is
// checked by validating the fleet, not on every device.
func parse(inputs []Input, device string) (parsedSet, Errors) {
	var set parsedSet
	errs := set.add(inputs, device)
	errs = append(errs, set.checkNames()...)
	return set, errs
}

// add parses inputs into s, as parse does, without checking the profile
// names.
func (s *parsedSet) add(inputs []Input, device string) Errors {
	sorted := append([]Input(nil), inputs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	set := s
	var errs Errors
	for _, in := range sorted {
		if err := CheckSize(in.Name, int64(len(in.Data))); err != nil {
			errs = append(errs, err.(*Error))
			continue
		}
		if device != "" && !in.PerDevice && !mayConcern(in.Data, device) {
			continue // another device's file: checked by validating the fleet
		}
		docs, err := splitDocuments(in.Name, in.Data)
		if err != nil {
			errs = append(errs, err.(*Error))
		}
		for _, doc := range docs {
			if !set.parseFleetDoc(in, doc, &errs) {
				continue
			}
			if device != "" && !in.PerDevice && metadataName(doc) != device {
				continue
			}
			set.parseDevice(in, doc, device, &errs)
		}
	}
	return errs
}

func (s *parsedSet) parseDevice(in Input, doc *yaml3.Node, device string, errs *Errors) {
	p := parsed{perDevice: in.PerDevice}
	info, derrs := decodeDocument(in.Name, len(in.Data), doc, &p.dev)
	*errs = append(*errs, derrs...)
	if len(derrs) > 0 {
		return
	}
	name := p.dev.Metadata.Name
	switch {
	case name == "":
		errs.add(in.Name, info.line, "metadata.name", "missing: the name of the device this document is for")
		return
	case device != "" && name != device:
		errs.add(in.Name, lineOf(info, "metadata.name", info.line), "metadata.name",
			"this document is for device %q but it was read for device %q; move it to that device's path or fix the name", name, device)
		return
	}
	p.info = info
	s.devices = append(s.devices, p)
}

// parseFleetDoc parses a Profile or Rollout document of in into s; a
// document of another kind is an error. It reports true, and parses
// nothing, for a Device document, which each caller decodes as it needs.
func (s *parsedSet) parseFleetDoc(in Input, doc *yaml3.Node, errs *Errors) (isDevice bool) {
	api, kind, line := header(doc)
	switch {
	case api == APIVersion && kind == KindDevice:
		return true
	case api == APIVersion && kind == KindProfile:
		var p parsedProfile
		if p.info = decodeChecked(in, doc, &p.prof, p.prof.check, errs); p.info != nil {
			p.prof.Origin = origin(p.info, "")
			s.profiles = append(s.profiles, p)
		}
	case api == APIVersion && kind == KindRollout:
		var p parsedRollout
		if p.info = decodeChecked(in, doc, &p.roll, p.roll.check, errs); p.info != nil {
			p.roll.Origin = origin(p.info, "")
			s.rollouts = append(s.rollouts, p)
		}
	default:
		errs.add(in.Name, line, "", "%s", kindError(api, kind, KindDevice+", "+KindProfile+" or "+KindRollout))
	}
	return false
}

// decodeChecked decodes doc into v and runs check on it; it returns the
// document, or nil when decoding or check reported a problem.
func decodeChecked(in Input, doc *yaml3.Node, v any, check func(*document, *Errors), errs *Errors) *document {
	info, derrs := decodeDocument(in.Name, len(in.Data), doc, v)
	*errs = append(*errs, derrs...)
	if len(derrs) > 0 {
		return nil
	}
	n := len(*errs)
	check(info, errs)
	if len(*errs) > n {
		return nil
	}
	return info
}

func (p parsedProfile) name() string        { return p.prof.Metadata.Name }
func (p parsedProfile) document() *document { return p.info }
func (p parsedRollout) name() string        { return p.roll.Metadata.Name }
func (p parsedRollout) document() *document { return p.info }

// uniqueNames sorts items (profiles or rollouts, called kind) by name and
// reports a name used twice: layers are told apart, and ordered, by name.
func uniqueNames[T interface {
	name() string
	document() *document
}](items []T, kind string) Errors {
	sort.SliceStable(items, func(i, j int) bool { return items[i].name() < items[j].name() })
	var errs Errors
	for i := 1; i < len(items); i++ {
		a, b := items[i-1], items[i]
		if a.name() == b.name() {
			ai, bi := a.document(), b.document()
			errs.add(bi.file, lineOf(bi, "metadata.name", bi.line), "metadata.name",
				"%s/%s is declared twice (first at %s:%d); %s names must be unique", kind, b.name(), ai.file, lineOf(ai, "metadata.name", ai.line), kind)
		}
	}
	return errs
}

// checkNames reports a profile or rollout name used twice, and leaves
// both sorted by name.
func (s *parsedSet) checkNames() Errors {
	return append(uniqueNames(s.profiles, "profile"), uniqueNames(s.rollouts, "rollout")...)
}

// metadataName reads metadata.name of a mapping document without decoding
// it, or "".
func metadataName(doc *yaml3.Node) string {
	meta := mappingValue(doc.Content[0], "metadata")
	if meta == nil {
		return ""
	}
	if n := mappingValue(meta, "name"); n != nil {
		return n.Value
	}
	return ""
}

func mappingValue(n *yaml3.Node, key string) *yaml3.Node {
	if n.Kind != yaml3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func origin(info *document, field string) Origin {
	return Origin{File: info.file, Field: field, lines: info.lines}
}

func lineOf(info *document, field string, fallback int) int {
	if l, ok := info.lines[field]; ok {
		return l
	}
	return fallback
}

// mayConcern reports whether data may hold a document for device: a Device
// document naming it, a Profile or a Rollout. Each has the name or the kind in its
// text, unless written with a YAML escape (a backslash), so a file with
// neither is another device's and need not be parsed. With 10,000 devices
// in one repo this keeps composing one of them linear in bytes, not in
// YAML nodes.
func mayConcern(data []byte, device string) bool {
	return bytes.Contains(data, []byte(device)) || bytes.Contains(data, []byte(KindProfile)) || bytes.Contains(data, []byte(KindRollout)) || bytes.IndexByte(data, '\\') >= 0
}
