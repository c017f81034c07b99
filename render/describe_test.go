package render

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

func TestSensitiveFileIsCarriedAndMasked(t *testing.T) {
	secret := manifest.File{Path: "/etc/infer/key.pem", Content: "hunter2\n", Mode: "0600", Sensitive: true}
	d, err := Render(context.Background(), device(manifest.DeviceSpec{Files: []manifest.File{config, secret}}), "rev1", confined)
	require.NoError(t, err)
	require.Equal(t, []bool{false, true}, []bool{d.Resources[0].Sensitive, d.Resources[1].Sensitive})
	f := d.Specs["file/etc/infer/key.pem"].(File)
	require.True(t, f.Sensitive)
	require.Equal(t, "hunter2\n", string(f.Content), "the driver still writes the content")

	doc, err := json.Marshal(d.Document())
	require.NoError(t, err)
	require.NotContains(t, string(doc), "hunter2")
	require.Contains(t, string(doc), planner.SensitiveHidden+" 8 bytes, sha256:")
	require.Contains(t, string(doc), "threshold: 0.4", "other files are printed whole")
	require.Equal(t, "hunter2\n", d.Manifest.Spec.Files[1].Content, "masking leaves the declaration alone")
}

func TestDescribe(t *testing.T) {
	two := 2
	svc := manifest.Service{
		Name: "infer", Command: []string{"/bin/server", "--port", "808${replica}"}, Env: map[string]string{"B": "2", "A": "1"},
		Restart: "on-failure", Replicas: &two, Resources: &manifest.Resources{Memory: "512Mi", CPU: "1.5"},
		Health: &manifest.Health{TCP: "127.0.0.1:808${replica}"},
	}
	m := manifest.Model{Name: "detector", Ref: "registry.local:5000/models/detector:v8"}
	d, err := Render(context.Background(), device(manifest.DeviceSpec{Models: []manifest.Model{m}, Files: []manifest.File{config}, Services: []manifest.Service{svc}}), "rev1", confined)
	require.NoError(t, err)

	c, ok := Describe(d.Specs["service/infer"])
	require.True(t, ok)
	require.Equal(t, []planner.Field{
		{Name: "command", Value: `["/bin/server","--port","8080"]`},
		{Name: "env.A", Value: "1"}, {Name: "env.B", Value: "2"},
		{Name: "restart", Value: "on-failure"}, {Name: "memory", Value: "512Mi"}, {Name: "cpu", Value: "1500m"},
		{Name: "health", Value: "tcp 127.0.0.1:8080"},
	}, c.Fields)

	c, ok = Describe(d.Specs["model/detector"])
	require.True(t, ok)
	require.Equal(t, []planner.Field{{Name: "ref", Value: m.Ref}}, c.Fields, "an unresolved ref has no digest")
	require.Equal(t, []planner.Field{{Name: planner.FieldDigest, Value: m.Ref}}, d.Resources[0].Fields)

	m.Include = []string{"*.gguf", "tokenizer.json"}
	withInclude, err := Render(context.Background(), device(manifest.DeviceSpec{Models: []manifest.Model{m}}), "rev1", confined)
	require.NoError(t, err)
	c, _ = Describe(withInclude.Specs["model/detector"])
	require.Equal(t, []planner.Field{{Name: "ref", Value: m.Ref}, {Name: "include", Value: `["*.gguf", "tokenizer.json"]`}}, c.Fields)
	require.Equal(t, []planner.Field{{Name: planner.FieldDigest, Value: m.Ref}, {Name: planner.FieldInclude, Value: `["*.gguf", "tokenizer.json"]`}}, withInclude.Resources[0].Fields)

	c, _ = Describe(Model{Ref: "r/tuned:v1", Bases: []string{"r/base:v1 → sha256:ab"}})
	require.Equal(t, []planner.Field{{Name: "ref", Value: "r/tuned:v1"}, {Name: "base", Value: "r/base:v1 → sha256:ab"}}, c.Fields, "a base ModelKit, pinned")

	c, ok = Describe(d.Specs["file/etc/infer/config.yaml"])
	require.True(t, ok)
	require.Equal(t, planner.Content{Data: []byte(config.Content), Size: int64(len(config.Content))}, c)

	_, ok = Describe(nil)
	require.False(t, ok)
}
