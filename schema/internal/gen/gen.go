package gen

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/invopop/jsonschema"

	"github.com/tend-dev/tend/manifest"
)

// kinds are the Go types of the documents that have a schema: adding a kind
// is a line here, one in package schema's list, and `go generate ./schema`.
var kinds = map[string]any{
	manifest.KindDevice:      manifest.Device{},
	manifest.KindAgentConfig: manifest.AgentConfig{},
	manifest.KindProfile:     manifest.Profile{},
	manifest.KindRollout:     manifest.Rollout{},
}

// durationPattern is Go's duration syntax (time.ParseDuration), without a
// sign: tend refuses negative durations.
const durationPattern = `^(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))+)$`

// ratePattern is a rate as manifest.ParseRate reads it (it also refuses
// one under 1B/s).
const ratePattern = `^[0-9]+(\.[0-9]+)?(B|kB|KB|MB|GB|KiB|MiB|GiB)/s$`

// modePattern is an octal file mode, as manifest.ParseMode takes it.
const modePattern = `^(0?[0-7]{3}|[0-7]{4})$`

// Kinds are the kinds that have a Go type here, sorted.
func Kinds() []string {
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// File is the name of kind's schema file in package schema's folder.
func File(kind string) string { return strings.ToLower(kind) + ".json" }

// manifestPath is the import path of the package whose types the schemas
// describe.
const manifestPath = "github.com/tend-dev/tend/manifest"

// Comments are the Go doc comments of manifest's types and fields, the
// schemas' descriptions, read from the folder dir (manifest's, or a copy
// of it), keyed as jsonschema.Reflector.CommentMap keys manifest's.
func Comments(dir string) (map[string]string, error) {
	r := &jsonschema.Reflector{}
	// The parser keys a type by base joined with the folder it was found
	// in: the keys of dir itself are made manifest's.
	const base = "x"
	if err := r.AddGoComments(base, dir); err != nil {
		return nil, fmt.Errorf("read the doc comments of %s: %w", dir, err)
	}
	prefix := path.Join(base, filepath.ToSlash(dir)) + "."
	out := make(map[string]string, len(r.CommentMap))
	for k, v := range r.CommentMap {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[manifestPath+"."+rest] = v
		}
	}
	return out, nil
}

// All returns the schema of every kind by its file name, described by the
// doc comments of manifest's Go files in manifestDir (see Comments).
func All(manifestDir string) (map[string][]byte, error) {
	c, err := Comments(manifestDir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, k := range Kinds() {
		b, err := Generate(k, c)
		if err != nil {
			return nil, err
		}
		out[File(k)] = b
	}
	return out, nil
}

// Generate returns the JSON Schema of kind from its Go type. comments maps
// a type or field (as jsonschema.Reflector.CommentMap) to its description.
func Generate(kind string, comments map[string]string) ([]byte, error) {
	v, ok := kinds[kind]
	if !ok {
		return nil, fmt.Errorf("no Go type for kind %q", kind)
	}
	r := &jsonschema.Reflector{
		RequiredFromJSONSchemaTags: true,
		ExpandedStruct:             true,
		CommentMap:                 comments,
		Mapper:                     mapType,
	}
	s := r.Reflect(v)
	s.ID = "" // where the file is put names it; a URL here would be made up
	s.Title = kind
	if f, ok := s.Definitions["File"]; ok {
		if m, ok := f.Properties.Get("mode"); ok && len(m.OneOf) > 0 {
			m.OneOf[0].Pattern = modePattern // as manifest.ParseMode reads it
			m.Description = `The file's permission bits in octal, quoted: "0644".`
		}
	}
	for def, key := range map[string]string{"Model": "name", "File": "path", "Service": "name"} {
		if d, ok := s.Definitions[def]; ok {
			onlyKeyWhenAbsent(d, key)
		}
	}
	if d, ok := s.Definitions["Service"]; ok {
		// A service is a process (command) or a container (image), not
		// both: when it is not absent, exactly one of them.
		if d.Else == nil {
			d.If = &jsonschema.Schema{Properties: jsonschema.NewProperties(), Required: []string{"absent"}}
			d.If.Properties.Set("absent", &jsonschema.Schema{Const: true})
			d.Else = &jsonschema.Schema{}
		}
		d.Else.OneOf = []*jsonschema.Schema{{Required: []string{"command"}}, {Required: []string{"image"}}}
	}
	s.Description = fmt.Sprintf("A tend %s document (%s).", kind, manifest.APIVersion)
	if p, ok := s.Properties.Get("apiVersion"); ok {
		p.Const = manifest.APIVersion
	}
	if p, ok := s.Properties.Get("kind"); ok {
		p.Const = kind
	}
	s.Required = append([]string{"apiVersion", "kind"}, s.Required...)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// mapType gives the types whose YAML is not their Go shape their schema.
func mapType(t reflect.Type) *jsonschema.Schema {
	if t == reflect.TypeOf(manifest.Duration(0)) {
		return &jsonschema.Schema{Type: "string", Pattern: durationPattern,
			Description: `A duration in Go syntax, such as "30s", "5m" or "1h30m".`}
	}
	if t == reflect.TypeOf(manifest.Rate{}) {
		return &jsonschema.Schema{Type: "string", Pattern: ratePattern,
			Description: `Bytes per second with a unit, such as "2MiB/s", "500KiB/s" or "1MB/s".`}
	}
	return nil
}

// onlyKeyWhenAbsent makes an item with absent: true need only its key:
// the other required fields are required when it is not absent.
func onlyKeyWhenAbsent(d *jsonschema.Schema, key string) {
	var rest []string
	for _, r := range d.Required {
		if r != key {
			rest = append(rest, r)
		}
	}
	if len(rest) == 0 {
		return
	}
	d.Required = []string{key}
	absent := jsonschema.NewProperties()
	absent.Set("absent", &jsonschema.Schema{Const: true})
	d.If = &jsonschema.Schema{Properties: absent, Required: []string{"absent"}}
	d.Else = &jsonschema.Schema{Required: rest}
}
