package manifest

import (
	"fmt"
	"path"
	"sort"
	"strings"
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

// Load parses every Device document in inputs and merges them into the
// desired state of one device. Every document must name that device. It
// reports every problem it finds, not just the first; it does not validate
// the resources (see Validate).
func Load(device string, inputs []Input) (*Device, error) {
	docs, errs := parse(inputs)
	for _, d := range docs {
		if d.dev.Metadata.Name != device {
			errs.add(d.info.file, lineOf(d.info, "metadata.name", d.info.line), "metadata.name",
				"this document is for device %q but it was read for device %q; move it to that device's path or fix the name", d.dev.Metadata.Name, device)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if len(docs) == 0 {
		return nil, Errors{{Msg: fmt.Sprintf("no Device document for %q in %d manifest files", device, len(inputs))}}
	}
	return mergeAll(device, docs)
}

// LoadAll parses every Device document in inputs and merges them by
// metadata.name, for checking manifests without knowing the devices.
func LoadAll(inputs []Input) (map[string]*Device, error) {
	docs, errs := parse(inputs)
	if len(errs) > 0 {
		return nil, errs
	}
	byName := map[string][]parsed{}
	for _, d := range docs {
		byName[d.dev.Metadata.Name] = append(byName[d.dev.Metadata.Name], d)
	}
	out := map[string]*Device{}
	for name, ds := range byName {
		dev, err := mergeAll(name, ds)
		if err != nil {
			errs = append(errs, err.(Errors)...)
			continue
		}
		out[name] = dev
	}
	return out, errs.err()
}

type parsed struct {
	dev  Device
	info *document
}

// parse decodes every Device document of inputs, in file name order.
func parse(inputs []Input) ([]parsed, Errors) {
	sorted := append([]Input(nil), inputs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var out []parsed
	var errs Errors
	for _, in := range sorted {
		if err := CheckSize(in.Name, int64(len(in.Data))); err != nil {
			errs = append(errs, err.(*Error))
			continue
		}
		docs, err := splitDocuments(in.Name, in.Data)
		if err != nil {
			errs = append(errs, err.(*Error))
		}
		for _, doc := range docs {
			api, kind, line := header(doc)
			if kind != KindDevice || api != APIVersion {
				errs.add(in.Name, line, "", "%s", kindError(api, kind, KindDevice))
				continue
			}
			var p parsed
			info, derrs := decodeDocument(in.Name, doc, &p.dev)
			errs = append(errs, derrs...)
			if len(derrs) > 0 {
				continue
			}
			if p.dev.Metadata.Name == "" {
				errs.add(in.Name, line, "metadata.name", "missing: the name of the device this document is for")
				continue
			}
			p.info = info
			out = append(out, p)
		}
	}
	return out, errs
}

func mergeAll(device string, docs []parsed) (*Device, error) {
	merged := &Device{APIVersion: APIVersion, Kind: KindDevice, Metadata: Metadata{Name: device}}
	labelFrom := map[string]string{}
	var errs Errors
	for _, p := range docs {
		for k, v := range p.dev.Metadata.Labels {
			if prev, ok := merged.Metadata.Labels[k]; ok && prev != v {
				errs.add(p.info.file, lineOf(p.info, "metadata.labels."+k, p.info.line), "metadata.labels."+k,
					"label %s is %q here but %q in %s", k, v, prev, labelFrom[k])
				continue
			}
			if merged.Metadata.Labels == nil {
				merged.Metadata.Labels = map[string]string{}
			}
			merged.Metadata.Labels[k], labelFrom[k] = v, p.info.file
		}
		merge(merged, &p.dev, p.info)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return merged, nil
}

func merge(into, d *Device, info *document) {
	for i, m := range d.Spec.Models {
		m.Origin = origin(info, fmt.Sprintf("spec.models[%d]", i))
		into.Spec.Models = append(into.Spec.Models, m)
	}
	for i, f := range d.Spec.Files {
		f.Origin = origin(info, fmt.Sprintf("spec.files[%d]", i))
		into.Spec.Files = append(into.Spec.Files, f)
	}
	for i, s := range d.Spec.Services {
		s.Origin = origin(info, fmt.Sprintf("spec.services[%d]", i))
		into.Spec.Services = append(into.Spec.Services, s)
	}
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
