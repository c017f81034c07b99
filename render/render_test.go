package render

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

var (
	config = manifest.File{Path: "/etc/infer/config.yaml", Content: "threshold: 0.4\n"}
	labels = manifest.File{Path: "/etc/infer/labels.txt", Content: "cat\ndog\n", Mode: "0600"}
)

func device(spec manifest.DeviceSpec) *manifest.Device {
	return &manifest.Device{Metadata: manifest.Metadata{Name: "cam-017"}, Spec: spec}
}

var confined = Options{Root: "/srv/node", StateDir: "/var/lib/tend", AllowPaths: []string{"/etc/infer", "/opt/models"}, CheckAllowPaths: true}

func TestRenderFiles(t *testing.T) {
	tests := []struct {
		name    string
		files   []manifest.File
		wantErr string
	}{
		{"ok", []manifest.File{config, labels}, ""},
		{"relative path", []manifest.File{{Path: "etc/infer/x"}}, `file "etc/infer/x": invalid path: "etc/infer/x" is not absolute`},
		{"not allowed", []manifest.File{{Path: "/etc/passwd", Origin: manifest.Origin{File: "devices/cam-017/files.yaml", Field: "spec.files[0]"}}},
			"file/etc/passwd (devices/cam-017/files.yaml spec.files[0]): path not allowed: /etc/passwd is not under any allowed path (/etc/infer, /opt/models); add an allowPaths entry"},
		{"bad mode", []manifest.File{{Path: "/etc/infer/x", Mode: "rwx"}}, `file/etc/infer/x: invalid file mode "rwx"`},
		{"declared twice", []manifest.File{config, config}, "file/etc/infer/config.yaml: declared twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Render(context.Background(), device(manifest.DeviceSpec{Files: tt.files}), "rev1", confined)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "cam-017", d.Device)
			require.Equal(t, "rev1", d.Revision)
			require.Equal(t, []string{"file/etc/infer/config.yaml", "file/etc/infer/labels.txt"}, ids(d))
			require.Equal(t, File{Path: labels.Path, Content: []byte(labels.Content), Mode: 0o600}, d.Specs["file/etc/infer/labels.txt"])
		})
	}
}

func TestFileResource(t *testing.T) {
	const helloDigest = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	tests := []struct {
		name string
		mode string
		want string
	}{
		{"default mode", "", "0644"},
		{"four digits", "0600", "0600"},
		{"three digits", "755", "0755"},
		{"setuid", "4755", "4755"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, r, err := file(manifest.File{Path: "/etc/infer/a", Content: "hello", Mode: tt.mode}, []string{"/"})
			require.NoError(t, err)
			require.Equal(t, planner.Resource{
				ID:   "file/etc/infer/a",
				Kind: planner.KindFile,
				Fields: []planner.Field{
					{Name: "content", Value: helloDigest},
					{Name: "mode", Value: tt.want},
				},
			}, r)
		})
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in      string
		wantErr bool
	}{
		{"0644", false}, {"0000", false}, {"7777", false}, {"17777", true}, {"0648", true}, {"-1", true}, {"abc", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			m, err := ParseMode(tt.in)
			if tt.wantErr {
				require.ErrorContains(t, err, "invalid file mode")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.in, FormatMode(m))
		})
	}
}

// pinned resolves every model to a digest of its name, and holds "held".
type pinned struct{}

func (pinned) Resolve(_ context.Context, m manifest.Model) (Resolution, error) {
	switch m.Name {
	case "missing":
		return Resolution{}, errors.New("not found in registry")
	case "held":
		return Resolution{Digest: "sha256:" + fmt.Sprintf("%064x", 1), Held: errors.New("registry down")}, nil
	case "rolled-back":
		q := errors.New("model/rolled-back v2 (sha256:0000) was rolled back on this node")
		return Resolution{Digest: m.Ref, Held: q, Quarantined: q}, nil
	}
	return Resolution{Digest: "sha256:" + fmt.Sprintf("%064x", len(m.Name)), Tag: "v8", Reason: "new"}, nil
}

func TestRenderModelsAndServices(t *testing.T) {
	two := 2
	spec := manifest.DeviceSpec{
		Models: []manifest.Model{
			{Name: "detector", Ref: "registry.local:5000/models/detector:v8", Path: "/opt/models/detector"},
			{Name: "classifier", Ref: "registry.local:5000/models/classifier", Policy: &manifest.Policy{Semver: ">=8"}},
		},
		Files: []manifest.File{config},
		Services: []manifest.Service{{
			Name: "infer", Replicas: &two, Restart: manifest.RestartAlways,
			Command:   []string{"/bin/server", "--model", "${model:detector}/model.onnx", "--labels", "${model:classifier}/labels.txt", "--port", "80${replica}"},
			Env:       map[string]string{"CONFIG": "${file:/etc/infer/config.yaml}"},
			Health:    &manifest.Health{HTTP: "http://127.0.0.1:80${replica}/healthz"},
			Resources: &manifest.Resources{Memory: "64Mi", CPU: "500m"},
		}},
	}
	d, err := Render(context.Background(), device(spec), "rev1", Options{Root: "/srv/node", StateDir: "/var/lib/tend",
		AllowPaths: []string{"/opt/models", "/etc/infer"}, CheckAllowPaths: true, Resolver: pinned{}})
	require.NoError(t, err)
	require.Equal(t, []string{"model/detector", "model/classifier", "file/etc/infer/config.yaml", "service/infer"}, ids(d))
	require.NoError(t, d.Held)

	m, ok := d.Model("classifier")
	require.True(t, ok)
	require.Equal(t, Model{Name: "classifier", Ref: "registry.local:5000/models/classifier", Policy: ">=8",
		Digest: "sha256:" + fmt.Sprintf("%064x", len("classifier")), Tag: "v8"}, m)
	require.Equal(t, "new", d.Resources[0].Reason, "the resolver's reason is the resource's")

	s := d.Specs["service/infer"].(Service)
	require.Len(t, s.Replicas, 2)
	require.Equal(t, []string{"/bin/server", "--model", "/srv/node/opt/models/detector/model.onnx",
		"--labels", "/var/lib/tend/models/classifier/current/labels.txt", "--port", "801"}, s.Replicas[1].Command)
	require.Equal(t, map[string]string{"CONFIG": "/srv/node/etc/infer/config.yaml"}, s.Replicas[0].Env)
	require.Equal(t, "http://127.0.0.1:801/healthz", s.Replicas[1].Health.HTTP)
	require.Equal(t, int64(64<<20), s.Replicas[0].Memory)
	require.Equal(t, int64(500), s.Replicas[0].CPUMilli)
	r := d.Resources[3]
	require.Equal(t, []string{"file/etc/infer/config.yaml", "model/classifier", "model/detector"}, r.Deps)
	require.Equal(t, []planner.Field{{Name: "spec", Value: s.Hash}, {Name: "replicas", Value: "2"}, {Name: "limits"}}, r.Fields)

	t.Run("the hash ignores the replica count", func(t *testing.T) {
		three := 3
		spec.Services[0].Replicas = &three
		again, err := Render(context.Background(), device(spec), "rev1", Options{Root: "/srv/node", StateDir: "/var/lib/tend", Resolver: pinned{}})
		require.NoError(t, err)
		require.Equal(t, s.Hash, again.Specs["service/infer"].(Service).Hash)
		spec.Services[0].Replicas = &two
	})
	t.Run("the hash follows the paths its references expand to", func(t *testing.T) {
		moved, err := Render(context.Background(), device(spec), "rev1", Options{Root: "/other", StateDir: "/var/lib/tend", Resolver: pinned{}})
		require.NoError(t, err)
		require.NotEqual(t, s.Hash, moved.Specs["service/infer"].(Service).Hash)
	})
}

func TestRenderErrorsNameTheResource(t *testing.T) {
	origin := manifest.Origin{File: "devices/cam-017/models.yaml", Field: "spec.models[0]"}
	neg := -1
	tests := []struct {
		name    string
		spec    manifest.DeviceSpec
		wantErr string
	}{
		{"model not found", manifest.DeviceSpec{Models: []manifest.Model{{Name: "missing", Ref: "r/m:v1", Origin: origin}}},
			"model/missing (devices/cam-017/models.yaml spec.models[0]): not found in registry"},
		{"model path not allowed", manifest.DeviceSpec{Models: []manifest.Model{{Name: "m", Ref: "r/m:v1", Path: "/etc/models/m"}}},
			"model/m: path not allowed: /etc/models/m is not under any allowed path"},
		{"negative replicas", manifest.DeviceSpec{Services: []manifest.Service{{Name: "s", Command: []string{"/x"}, Replicas: &neg}}},
			"service/s: replicas must be 0 or more, got -1"},
		{"bad memory", manifest.DeviceSpec{Services: []manifest.Service{{Name: "s", Command: []string{"/x"}, Resources: &manifest.Resources{Memory: "lots"}}}},
			`service/s: invalid memory quantity "lots"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := confined
			opts.Resolver = pinned{}
			_, err := Render(context.Background(), device(tt.spec), "rev1", opts)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestRenderHeld(t *testing.T) {
	d, err := Render(context.Background(), device(manifest.DeviceSpec{Models: []manifest.Model{{Name: "held", Ref: "r/m:v1"}}}), "rev1",
		Options{Resolver: pinned{}})
	require.NoError(t, err)
	require.ErrorContains(t, d.Held, "registry down", "render says why a model is held")
	m, _ := d.Model("held")
	require.ErrorContains(t, m.Held, "registry down", "and so does the model's spec")
	doc := d.Document()
	require.Equal(t, "registry down", doc.Spec.Models[0].Held)
	require.Equal(t, m.Digest, doc.Spec.Models[0].Digest)
}

func TestDeclared(t *testing.T) {
	d, err := Render(context.Background(), device(manifest.DeviceSpec{Models: []manifest.Model{
		{Name: "a", Ref: "r/a:v1"}, {Name: "b", Ref: "r/b", Policy: &manifest.Policy{Semver: "^1"}},
	}}), "rev1", Options{})
	require.NoError(t, err)
	require.Equal(t, "r/a:v1", d.Resources[0].Fields[0].Value)
	require.Equal(t, "r/b (semver ^1)", d.Resources[1].Fields[0].Value)
	require.Empty(t, d.Document().Spec.Models[0].Digest, "a ref as declared is not printed as a digest")
}

func TestModelReason(t *testing.T) {
	cd := "sha256:cdcdcdcdcdcdcdcdcdcdcdcdcdcd"
	ab := "sha256:abababababababababababababab"
	tests := []struct {
		name     string
		m        Model
		active   *Active
		download int64
		want     string
	}{
		{"nothing active", Model{Ref: "r/m:v8", Digest: cd, Tag: "v8"}, nil, 1000, "r/m:v8 → " + cd + ", 1.0 kB to download"},
		{"policy, nothing active", Model{Ref: "r/m", Policy: "^8", Digest: cd, Tag: "v8.1"}, nil, 0, "r/m:v8.1 → " + cd + ", nothing to download"},
		{"tag moved", Model{Ref: "r/m:v8", Digest: cd, Tag: "v8"}, &Active{Ref: "r/m:v8", Digest: ab, Tag: "v8"}, 1000,
			"sha256:abababababab → sha256:cdcdcdcdcdcd (tag v8 moved), 1.0 kB to download"},
		{"new tag matches", Model{Ref: "r/m", Policy: "^8", Digest: cd, Tag: "v8.4"}, &Active{Ref: "r/m", Policy: "^8", Digest: ab, Tag: "v8.3"}, -1,
			"sha256:abababababab → sha256:cdcdcdcdcdcd (new tag v8.4 matches ^8)"},
		{"ref changed", Model{Ref: "r/m:v9", Digest: cd, Tag: "v9"}, &Active{Ref: "r/m:v8", Digest: ab, Tag: "v8"}, 0,
			"sha256:abababababab → sha256:cdcdcdcdcdcd (ref r/m:v9), nothing to download"},
		{"a base ModelKit", Model{Ref: "r/tuned:v1", Digest: cd, Tag: "v1", Bases: []string{"r/base:v1 → " + ab}}, nil, 1000,
			"r/tuned:v1 → " + cd + ", base r/base:v1 → " + ab + ", 1.0 kB to download"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ModelReason(tt.m, tt.active, tt.download))
		})
	}
}

func ids(d *Desired) []string {
	var out []string
	for _, r := range d.Resources {
		out = append(out, r.ID)
	}
	return out
}

// The spec hash is what tells a service's running instances from its
// declaration: a change to what it covers restarts every service on every
// node once. This pins it to the value earlier releases computed for the
// same declaration.
func TestServiceSpecHashIsStable(t *testing.T) {
	two := 2
	dev := device(manifest.DeviceSpec{
		Models: []manifest.Model{{Name: "detector", Ref: "registry.local:5000/models/detector:v8", Path: "/opt/models/detector"},
			{Name: "classifier", Ref: "registry.local:5000/models/classifier:v1"}},
		Files: []manifest.File{{Path: "/etc/infer/config.yaml", Content: "x"}},
		Services: []manifest.Service{{Name: "infer", Replicas: &two, Restart: "always",
			Command:   []string{"/bin/server", "--model", "${model:detector}/m.onnx", "--labels", "${model:classifier}/l.txt", "--port", "80${replica}"},
			Env:       map[string]string{"CONFIG": "${file:/etc/infer/config.yaml}", "LOG": "info"},
			Health:    &manifest.Health{HTTP: "http://127.0.0.1:80${replica}/healthz", StartupGrace: manifest.Duration(10e9)},
			Resources: &manifest.Resources{Memory: "64Mi", CPU: "500m"}, StopTimeout: manifest.Duration(5e9), User: "nobody"}},
	})
	d, err := Render(context.Background(), dev, "rev", Options{Root: "/srv/node", StateDir: "/var/lib/tend"})
	require.NoError(t, err)
	require.Equal(t, "sha256:a4ad9ec30b001bf523b8a25f9b1a0f17b95b6d0d449376d86436d6303521fab8", d.Specs["service/infer"].(Service).Hash)
}

// A model held only because every version it names was rolled back here
// is held by quarantine: its registry answered. One held for its registry
// makes the hold the registry's.
func TestHeldByQuarantine(t *testing.T) {
	render := func(names ...string) *Desired {
		var spec manifest.DeviceSpec
		for _, n := range names {
			spec.Models = append(spec.Models, manifest.Model{Name: n, Ref: "registry.local:5000/models/" + n + ":v2", Path: "/opt/models/" + n})
		}
		d, err := Render(context.Background(), device(spec), "rev1", Options{Root: "/srv/node", StateDir: "/var/lib/tend",
			AllowPaths: []string{"/opt/models"}, CheckAllowPaths: true, Resolver: pinned{}})
		require.NoError(t, err)
		return d
	}
	d := render("rolled-back")
	require.Error(t, d.Held)
	require.True(t, d.HeldByQuarantine)
	d = render("rolled-back", "held")
	require.False(t, d.HeldByQuarantine, "a model held for its registry")
	require.False(t, render("detector").HeldByQuarantine, "nothing held")
}
