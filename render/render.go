package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tend-dev/tend/internal/confine"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// Options say where a device's resources land and how its models are
// pinned.
type Options struct {
	// Root is the prefix under which every managed path is placed
	// ("/" when empty); ${file:PATH} expands to PATH under it.
	Root string
	// StateDir holds model versions: ${model:NAME} of a model without a
	// path expands to its link there (manifest.DefaultStateDir when empty).
	StateDir string
	// AllowPaths are the only paths under which files and model paths may
	// be placed, when CheckAllowPaths is set (CI without a node checks
	// them only when it is given some).
	AllowPaths      []string
	CheckAllowPaths bool
	// Resolver pins model refs; nil means Declared.
	Resolver Resolver
}

// Desired is a device's rendered desired state: what the planner compares,
// and the spec each resource's driver applies.
type Desired struct {
	planner.Desired
	// Manifest is the declaration it was rendered from.
	Manifest *manifest.Device
	// Specs holds, by resource id, a File, Model or Service.
	Specs map[string]any
	// Offline says why models were kept at the version active on the node
	// (their registry could not be asked; their ref did not change), or is
	// nil. It is a warning, not a failure.
	Offline error
	// Held says why models could not take their new ref (their registry
	// could not be asked), or is nil: they and what uses them are left as
	// they are, and the plan holds their actions.
	Held error
	// Quarantined says why models and container images were kept off
	// their newest version (it was rolled back on this node), or is nil. It is a warning, and holds
	// a release: tend_release_held{reason="quarantined"}.
	Quarantined error
	// Unverified says which versions semver policies passed over because
	// they do not carry the signatures verify asks for, and what each
	// resolved to instead, or is nil. It is a warning.
	Unverified error
	// ActiveUnverified says which models and container images run a
	// version that no longer carries the signatures verify asks for (a
	// key was removed from it), or is nil: they keep it, and a new
	// version must verify. It is a warning.
	ActiveUnverified error
	// Skips are the versions semver policies passed over (see Skip), by
	// model in declaration order, each highest first.
	Skips []Skip
	// HeldByQuarantine is true when every model and service Held names is
	// held only because each version its ref names was rolled back on
	// this node: its registry answered (tend_registry_unreachable stays 0).
	HeldByQuarantine bool
}

// Model returns the spec of the declared model called name.
func (d *Desired) Model(name string) (Model, bool) {
	m, ok := d.Specs[planner.ModelID(name)].(Model)
	return m, ok
}

// Render turns dev, a validated device at revision, into its desired
// state. Every model is pinned through opts.Resolver; the first resource
// that cannot be rendered fails the whole render, naming it and where it
// was declared.
func Render(ctx context.Context, dev *manifest.Device, revision string, opts Options) (*Desired, error) {
	if dev == nil {
		return nil, errors.New("render: no device")
	}
	root, err := filepath.Abs(orDefault(opts.Root, manifest.DefaultRoot))
	if err != nil {
		return nil, fmt.Errorf("render: root: %w", err)
	}
	state := orDefault(opts.StateDir, manifest.DefaultStateDir)
	resolver := opts.Resolver
	if resolver == nil {
		resolver = Declared{}
	}
	d := &Desired{
		Desired:  planner.Desired{Device: dev.Metadata.Name, Revision: revision},
		Manifest: dev,
		Specs:    make(map[string]any, len(dev.Spec.Models)+len(dev.Spec.Files)+len(dev.Spec.Services)),
	}
	var held, offline, quarantined, activeUnverified []error
	heldByQuarantine := 0
	for _, m := range dev.Spec.Models {
		spec, r, err := model(ctx, m, opts.confine(), resolver)
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", planner.ModelID(m.Name), origin(m.Origin), err)
		}
		if spec.Held != nil {
			held = append(held, fmt.Errorf("%s held: %w", planner.ModelID(m.Name), spec.Held))
		}
		if spec.Offline != nil {
			offline = append(offline, spec.Offline)
		}
		if spec.Quarantined != nil {
			quarantined = append(quarantined, spec.Quarantined)
		}
		if spec.ActiveUnverified != nil {
			activeUnverified = append(activeUnverified, spec.ActiveUnverified)
		}
		if spec.Held != nil && spec.Quarantined != nil {
			heldByQuarantine++
		}
		d.Skips = append(d.Skips, spec.Skips...)
		d.add(r, spec)
	}
	for _, f := range dev.Spec.Files {
		spec, r, err := file(f, opts.confine())
		if err == nil && d.Specs[r.ID] != nil {
			err = errors.New("declared twice")
		}
		if err != nil {
			name := r.ID
			if !strings.HasPrefix(f.Path, "/") {
				name = "file " + strconv.Quote(f.Path)
			}
			return nil, fmt.Errorf("%s%s: %w", name, origin(f.Origin), err)
		}
		d.add(r, spec)
	}
	models := make(map[string]manifest.Model, len(dev.Spec.Models))
	for _, m := range dev.Spec.Models {
		models[m.Name] = m
	}
	refs := func(ref string) string {
		kind, target, _ := strings.Cut(ref, ":")
		switch kind {
		case "model":
			return ModelLink(root, state, target, models[target].Path)
		case "file":
			return filepath.Join(root, target)
		}
		return "${" + ref + "}"
	}
	modelSpecs := make(map[string]Model, len(dev.Spec.Models))
	for _, m := range dev.Spec.Models {
		modelSpecs[m.Name], _ = d.Model(m.Name)
	}
	values := make(map[string]string, len(d.Resources))
	for _, r := range d.Resources {
		values[r.ID] = fieldValues(r.Fields)
	}
	for _, s := range dev.Spec.Services {
		image, err := resolveImage(ctx, s, resolver)
		if err != nil {
			return nil, fmt.Errorf("%s%s: image %s: %w", planner.ServiceID(s.Name), origin(s.Origin), s.Image, err)
		}
		if image.Held != nil {
			held = append(held, fmt.Errorf("%s held: %w", planner.ServiceID(s.Name), image.Held))
		}
		if image.Offline != nil {
			offline = append(offline, image.Offline)
		}
		if image.Quarantined != nil {
			quarantined = append(quarantined, image.Quarantined)
		}
		if image.ActiveUnverified != nil {
			activeUnverified = append(activeUnverified, image.ActiveUnverified)
		}
		if image.Held != nil && image.Quarantined != nil {
			heldByQuarantine++
		}
		if err := checkModelRefs(s, modelSpecs); err != nil {
			return nil, err
		}
		spec, r, err := service(s, refs, func(p string) string { return filepath.Join(root, p) }, image)
		if err == nil && d.Specs[r.ID] != nil {
			err = errors.New("declared twice")
		}
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", planner.ServiceID(s.Name), origin(s.Origin), err)
		}
		spec.Inputs = make(map[string]string, len(r.Deps))
		for _, dep := range r.Deps {
			spec.Inputs[dep] = values[dep]
		}
		d.add(r, spec)
	}
	d.Held, d.Offline, d.Quarantined = errors.Join(held...), errors.Join(offline...), errors.Join(quarantined...)
	d.Unverified = unverified(d.Skips)
	d.ActiveUnverified = errors.Join(activeUnverified...)
	d.HeldByQuarantine = len(held) > 0 && heldByQuarantine == len(held)
	return d, nil
}

// fieldValues joins a resource's field values, as an input of a service.
func fieldValues(fields []planner.Field) string {
	var b strings.Builder
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f.Value)
	}
	return b.String()
}

func (d *Desired) add(r planner.Resource, spec any) {
	d.Resources = append(d.Resources, r)
	d.Specs[r.ID] = spec
}

// confine returns the allowed paths to check, or ["/"] when none are.
func (o Options) confine() []string {
	if !o.CheckAllowPaths {
		return []string{"/"}
	}
	return o.AllowPaths
}

func model(ctx context.Context, m manifest.Model, allow []string, resolver Resolver) (Model, planner.Resource, error) {
	if m.Path != "" {
		if _, _, err := confine.Locate(m.Path, allow); err != nil {
			return Model{}, planner.Resource{}, err
		}
	}
	res, err := resolver.Resolve(ctx, m)
	if err != nil {
		return Model{}, planner.Resource{}, err
	}
	spec := Model{Name: m.Name, Ref: m.Ref, Policy: policy(m), Path: m.Path, Digest: res.Digest, Tag: res.Tag, Include: m.Include, Files: res.Files, Bases: res.Bases, Offline: res.Offline, Held: res.Held, Quarantined: res.Quarantined, ActiveUnverified: res.ActiveUnverified, Download: res.Download}
	for _, s := range res.Skips {
		s.ID = planner.ModelID(m.Name)
		spec.Skips = append(spec.Skips, s)
	}
	r := planner.Resource{
		ID: planner.ModelID(m.Name), Kind: planner.KindModel, Reason: res.Reason,
		Fields: ModelFields(res.Digest, m.Include),
	}
	if res.Held != nil {
		r.Held = res.Held.Error()
	}
	return spec, r, nil
}

// ModelFields are the fields the planner compares for a model: its
// digest and, when it has one, its include (FieldInclude), which selects
// what the version folder holds.
func ModelFields(digest string, include []string) []planner.Field {
	f := []planner.Field{{Name: planner.FieldDigest, Value: digest}}
	if len(include) > 0 {
		f = append(f, planner.Field{Name: planner.FieldInclude, Value: FormatInclude(include)})
	}
	return f
}

// FormatInclude writes an include as plans print it: ["*.gguf", "tokenizer.json"].
func FormatInclude(include []string) string {
	b, _ := json.Marshal(include)
	return strings.ReplaceAll(string(b), `","`, `", "`)
}

// file returns f's spec and resource: its content digest and its mode as
// four octal digits (manifest.DefaultFileMode when f declares none). The
// resource has its id even when f is refused.
func file(f manifest.File, allow []string) (File, planner.Resource, error) {
	r := planner.Resource{ID: planner.FileID(f.Path), Kind: planner.KindFile, Sensitive: f.Sensitive}
	if err := confine.CheckPath(f.Path); err != nil {
		return File{}, r, err
	}
	mode, err := ParseMode(f.Mode)
	if err != nil {
		return File{}, r, err
	}
	if _, _, err := confine.Locate(f.Path, allow); err != nil {
		return File{}, r, err
	}
	r.Fields = []planner.Field{
		{Name: planner.FieldContent, Value: ContentDigest([]byte(f.Content))},
		{Name: planner.FieldMode, Value: FormatMode(mode)},
	}
	return File{Path: f.Path, Content: []byte(f.Content), Mode: mode, Sensitive: f.Sensitive}, r, nil
}

// origin formats where a resource was declared, for messages:
// " (devices/cam-017/device.yaml:12 spec.files[0])".
func origin(o manifest.Origin) string {
	if o.File == "" {
		return ""
	}
	s := " (" + o.File
	if l := o.Line(""); l > 0 {
		s += fmt.Sprintf(":%d", l)
	}
	if o.Field != "" {
		s += " " + o.Field
	}
	return s + ")"
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
