package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sv "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	yaml3 "go.yaml.in/yaml/v3"

	"github.com/tend-dev/tend/internal/testkit/docyaml"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/schema/internal/gen"
)

// stale lists the committed schema files that differ from generated, a
// schema by its file name.
func stale(t *testing.T, generated map[string][]byte) []string {
	t.Helper()
	var out []string
	for _, kind := range Kinds() {
		got, err := os.ReadFile(File(kind))
		require.NoError(t, err)
		if want, ok := generated[File(kind)]; !ok || !bytes.Equal(want, got) {
			out = append(out, File(kind))
		}
	}
	return out
}

// The committed schemas are what the Go types generate: the test
// generates them again in memory, as go generate ./schema does, and fails
// when a file differs.
func TestSchemasAreGenerated(t *testing.T) {
	require.Equal(t, gen.Kinds(), Kinds(), "schema's kinds and internal/gen's types differ: list a new kind in both")
	generated, err := gen.All("../manifest")
	require.NoError(t, err)
	if s := stale(t, generated); len(s) > 0 {
		t.Fatalf("schema/%s stale: run go generate ./schema", strings.Join(s, ", schema/"))
	}
	for _, kind := range Kinds() {
		committed, err := os.ReadFile(File(kind))
		require.NoError(t, err)
		embedded, err := Get(strings.ToUpper(kind))
		require.NoError(t, err)
		require.Equal(t, committed, embedded, kind)
	}
	_, err = Get("Fleet")
	require.ErrorContains(t, err, `no schema for kind "Fleet": use one of AgentConfig, Device, Profile, Rollout`)
}

// TestStaleSchemaIsFound generates the schemas from a copy of manifest
// with one doc comment changed: the schemas that describe that type are
// found stale, so the test above cannot pass by comparing nothing.
func TestStaleSchemaIsFound(t *testing.T) {
	dir := t.TempDir()
	entries, err := os.ReadDir("../manifest")
	require.NoError(t, err)
	changed := false
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../manifest", e.Name()))
		require.NoError(t, err)
		if c := bytes.Replace(b, []byte("\tTrustStore  string"), []byte("\t// Changed.\n\tTrustStore  string"), 1); !bytes.Equal(c, b) {
			b, changed = c, true
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644))
	}
	require.True(t, changed, "manifest has no NotationVerify.TrustStore field to change the comment of")
	generated, err := gen.All(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"agentconfig.json", "device.json", "profile.json"}, stale(t, generated))
}

// compile compiles the committed schema of kind with a real JSON Schema
// validator.
func compile(t *testing.T, kind string) *sv.Schema {
	t.Helper()
	b, err := Get(kind)
	require.NoError(t, err)
	doc, err := sv.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	c := sv.NewCompiler()
	require.NoError(t, c.AddResource(File(kind), doc))
	s, err := c.Compile(File(kind))
	require.NoError(t, err)
	return s
}

// instances returns the documents of a YAML file as JSON values, as an
// editor's YAML language server sees them.
func instances(t *testing.T, data []byte) []any {
	t.Helper()
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	var out []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		if v == nil {
			continue
		}
		js, err := json.Marshal(v)
		require.NoError(t, err)
		inst, err := sv.UnmarshalJSON(bytes.NewReader(js))
		require.NoError(t, err)
		out = append(out, inst)
	}
}

// Every example that tend reads is valid against its schema: the YAML
// files of examples/ and the ```yaml blocks of the docs (fragments
// completed), except the planned ones that tend refuses.
func TestExamplesMatchSchemas(t *testing.T) {
	schemas := map[string]*sv.Schema{}
	for _, k := range Kinds() {
		schemas[k] = compile(t, k)
	}
	check := func(t *testing.T, where string, data []byte) {
		for _, inst := range instances(t, data) {
			kind, _ := inst.(map[string]any)["kind"].(string)
			s, ok := schemas[kind]
			require.True(t, ok, "%s: no schema for kind %q", where, kind)
			require.NoError(t, s.Validate(inst), where)
		}
	}
	checked := 0
	err := filepath.WalkDir("../examples", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !manifest.IsManifest(filepath.Base(p)) {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(data, []byte("apiVersion: "+manifest.APIVersion)) {
			return err
		}
		require.Contains(t, string(data), "# yaml-language-server: $schema=", "%s names no schema for editors", p)
		t.Run(p, func(t *testing.T) { check(t, p, data) })
		checked++
		return nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, checked, 5)
	for _, md := range []string{"../README.md", "../DESIGN.md"} {
		data, err := os.ReadFile(md)
		require.NoError(t, err)
		for _, b := range docyaml.Blocks(strings.TrimPrefix(md, "../"), data) {
			if strings.Contains(b.Heading, "(planned)") || strings.HasPrefix(b.Heading, "Agent configuration") && b.File == "DESIGN.md" {
				continue // refused by tend, as manifest's tests show
			}
			t.Run(b.Where(), func(t *testing.T) { check(t, b.Where(), b.Document("cam-017")) })
		}
	}
}

// An item with absent: true needs only its key, as tend reads it.
func TestSchemasAcceptAbsentWithOnlyAKey(t *testing.T) {
	doc := "apiVersion: tend.dev/v1alpha1\nkind: %s\nmetadata: {name: p}\nspec:\n%s" +
		"  models: [{name: m, absent: true}]\n  files: [{path: /etc/infer/a, absent: true}]\n  services: [{name: s, absent: true}]\n"
	for kind, selector := range map[string]string{manifest.KindDevice: "", manifest.KindProfile: "  selector: {matchLabels: {hw: orin}}\n"} {
		t.Run(kind, func(t *testing.T) {
			require.NoError(t, compile(t, kind).Validate(instances(t, []byte(fmt.Sprintf(doc, kind, selector)))[0]))
		})
	}
}

// The schemas refuse what tend refuses: an unknown field, a value of the
// wrong type, a bad duration, another kind.
func TestSchemasRejectBadDocuments(t *testing.T) {
	device := compile(t, manifest.KindDevice)
	config := compile(t, manifest.KindAgentConfig)
	profile := compile(t, manifest.KindProfile)
	phead := "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: p}\n"
	head := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\n"
	tests := []struct {
		name   string
		schema *sv.Schema
		doc    string
		want   string
	}{
		{"unknown field", device, head + "spec:\n  files: [{path: /etc/infer/a, contnet: x}]\n", "contnet"},
		{"wrong type", device, head + "spec:\n  services: [{name: s, command: [x], replicas: two}]\n", "replicas"},
		{"negative replicas", device, head + "spec:\n  services: [{name: s, command: [x], replicas: -1}]\n", "replicas"},
		{"bad restart policy", device, head + "spec:\n  services: [{name: s, command: [x], restart: sometimes}]\n", "restart"},
		{"bad duration", device, head + "spec:\n  services: [{name: s, command: [x], stopTimeout: 10}]\n", "stopTimeout"},
		{"bad mode", device, head + "spec:\n  files: [{path: /etc/infer/a, mode: \"999\"}]\n", "mode"},
		{"missing name", device, head + "spec:\n  models: [{ref: r.local/m:v1}]\n", "name"},
		{"other kind", device, phead + "spec: {selector: {}}\n", "kind"},
		{"model without ref", device, head + "spec:\n  models: [{name: m}]\n", "ref"},
		{"absent: false needs a command", device, head + "spec:\n  services: [{name: s, absent: false}]\n", "command"},
		{"a service is a process or a container, not both", device, head + "spec:\n  services: [{name: s, command: [x], image: r.local/s:1}]\n", "oneOf"},
		{"profile without selector", profile, phead + "spec: {priority: 1}\n", "selector"},
		{"profile with labels", profile, "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: p, labels: {a: b}}\nspec: {selector: {}}\n", "labels"},
		{"unknown operator", profile, phead + "spec:\n  selector: {matchExpressions: [{key: hw, operator: Has}]}\n", "operator"},
		{"notify without a topic", config, "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nnotify: {mqtt: {url: \"tcp://broker:1883\"}}\n", "topic"},
		{"config duration", config, "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\njitter: soon\n", "jitter"},
		{"config rate without /s", config, "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\ndownloads: {maxRate: 2MiB}\n", "maxRate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.schema.Validate(instances(t, []byte(tt.doc))[0])
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}
