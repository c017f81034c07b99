package manifest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
)

// profile returns a Profile document; spec is its spec's lines, indented
// by two spaces.
func profile(name, spec string) string {
	return "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: " + name + "}\nspec:\n" + spec
}

func device(name, labels, spec string) string {
	return "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: " + name + ", labels: {" + labels + "}}\nspec:\n" + spec
}

// files makes inputs of name, text pairs.
func files(pairs ...string) []Input {
	var out []Input
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Input{Name: pairs[i], Data: []byte(pairs[i+1])})
	}
	return out
}

func compose(t *testing.T, inputs []Input, labels map[string]string) *Composed {
	t.Helper()
	c, err := Compose(inputs, ComposeOptions{Device: "cam-017", Labels: labels, ValidateOptions: allow})
	require.NoError(t, err)
	return c
}

func ids(c *Composed) []string {
	var out []string
	for _, l := range c.Layers {
		out = append(out, l.ID())
	}
	return out
}

func fileContents(d *Device) map[string]string {
	out := map[string]string{}
	for _, f := range d.Spec.Files {
		out[f.Path] = f.Content
	}
	return out
}

func TestComposeOrder(t *testing.T) {
	in := files(
		"profiles/b.yaml", profile("b", "  selector: {}\n  priority: 5\n  files: [{path: /etc/infer/b, content: b}]\n"),
		"profiles/a.yaml", profile("a", "  selector: {}\n  priority: 5\n  files: [{path: /etc/infer/a, content: a}]\n"),
		"profiles/low.yaml", profile("low", "  selector: {}\n  priority: -3\n  files: [{path: /etc/infer/a, content: low}, {path: /etc/infer/b, content: low}, {path: /etc/infer/d, content: low}]\n"),
		"profiles/other.yaml", profile("other", "  selector: {matchLabels: {hw: x86}}\n  files: [{path: /etc/infer/a, content: other}]\n"),
		"devices/cam-017/device.yaml", device("cam-017", "hw: orin", "  files: [{path: /etc/infer/d, content: device}]\n"),
	)
	c := compose(t, in, nil)
	t.Run("by priority, then name, the device last", func(t *testing.T) {
		require.Equal(t, []string{"profile/low", "profile/a", "profile/b", "device/cam-017"}, ids(c))
	})
	t.Run("later layers win", func(t *testing.T) {
		require.Equal(t, map[string]string{"/etc/infer/a": "a", "/etc/infer/b": "b", "/etc/infer/d": "device"}, fileContents(c.Device))
	})
	t.Run("origin is the winning layer's", func(t *testing.T) {
		for _, f := range c.Device.Spec.Files {
			if f.Path == "/etc/infer/d" {
				require.Equal(t, "devices/cam-017/device.yaml", f.Origin.File)
				require.Equal(t, 5, f.Origin.Line(".path"))
			}
		}
	})
	t.Run("a profile that does not match does not apply", func(t *testing.T) {
		require.NotContains(t, ids(c), "profile/other")
	})
}

func TestComposeKeyedReplace(t *testing.T) {
	base := profile("base", "  selector: {}\n"+
		"  models: [{name: det, ref: r.local/det:v1, path: /opt/models/det}]\n"+
		"  files: [{path: /etc/infer/c, content: base, mode: \"0600\", sensitive: true}]\n"+
		"  services:\n    - {name: infer, command: [/bin/a, --x], env: {A: a, B: b}, replicas: 2}\n")
	dev := device("cam-017", "", "  models: [{name: det, ref: r.local/det:v2}]\n"+
		"  files: [{path: /etc/infer/c, content: dev}]\n"+
		"  services: [{name: infer, command: [/bin/b], env: {B: dev}}]\n")
	c := compose(t, files("base.yaml", base, "dev.yaml", dev), nil)
	d := c.Device.Spec
	t.Run("model replaced whole", func(t *testing.T) {
		require.Len(t, d.Models, 1)
		require.Equal(t, "r.local/det:v2", d.Models[0].Ref)
		require.Empty(t, d.Models[0].Path)
	})
	t.Run("file replaced whole", func(t *testing.T) {
		require.Len(t, d.Files, 1)
		require.Equal(t, File{Path: "/etc/infer/c", Content: "dev", Origin: d.Files[0].Origin}, d.Files[0])
	})
	t.Run("service replaced whole, env not merged", func(t *testing.T) {
		require.Len(t, d.Services, 1)
		require.Equal(t, []string{"/bin/b"}, d.Services[0].Command)
		require.Equal(t, map[string]string{"B": "dev"}, d.Services[0].Env)
		require.Nil(t, d.Services[0].Replicas)
	})
	t.Run("provenance", func(t *testing.T) {
		require.Equal(t, Provenance{ID: "file/etc/infer/c", From: Source{Layer: "device/cam-017", File: "dev.yaml", Line: 6},
			Overrode: []Source{{Layer: "profile/base", File: "base.yaml", Line: 7}}}, c.Resources[0])
	})
}

func TestComposeAbsent(t *testing.T) {
	base := profile("base", "  selector: {}\n"+
		"  models: [{name: det, ref: r.local/det:v1}]\n"+
		"  files: [{path: /etc/infer/a, content: a}, {path: /etc/infer/b, content: b}]\n"+
		"  services: [{name: infer, command: [/bin/a]}, {name: keep, command: [/bin/k]}]\n")
	dev := device("cam-017", "", "  models: [{name: det, absent: true}]\n"+
		"  files: [{path: /etc/infer/a, absent: true}, {path: /etc/infer/nope, absent: true}]\n"+
		"  services: [{name: infer, absent: true}]\n")
	c := compose(t, files("base.yaml", base, "dev.yaml", dev), nil)
	t.Run("removes the keys", func(t *testing.T) {
		require.Empty(t, c.Device.Spec.Models)
		require.Equal(t, map[string]string{"/etc/infer/b": "b"}, fileContents(c.Device))
		require.Len(t, c.Device.Spec.Services, 1)
		require.Equal(t, "keep", c.Device.Spec.Services[0].Name)
	})
	t.Run("an absent key no layer declares is a warning", func(t *testing.T) {
		require.Len(t, c.Warnings, 1)
		require.Equal(t, `dev.yaml:6: spec.files[1].path: file/etc/infer/nope is absent: true but no earlier layer declares it, so there is nothing to remove: check the key and the profiles' priorities`,
			c.Warnings[0].Error())
	})
	t.Run("a removed key keeps its provenance", func(t *testing.T) {
		var removed []string
		for _, p := range c.Resources {
			if p.Removed {
				removed = append(removed, p.ID+" by "+p.From.Layer)
			}
		}
		require.Equal(t, []string{"file/etc/infer/a by device/cam-017", "model/det by device/cam-017", "service/infer by device/cam-017"}, removed)
	})
	t.Run("a later layer declares it again", func(t *testing.T) {
		again := profile("again", "  selector: {}\n  priority: 9\n  files: [{path: /etc/infer/a, content: again}]\n")
		drop := profile("drop", "  selector: {}\n  priority: 5\n  files: [{path: /etc/infer/a, absent: true}]\n")
		c := compose(t, files("base.yaml", base, "again.yaml", again, "drop.yaml", drop), nil)
		require.Equal(t, "again", fileContents(c.Device)["/etc/infer/a"])
	})
}

func TestComposeVars(t *testing.T) {
	base := profile("base", "  selector: {}\n  vars: {threshold: \"0.3\", level: info, url: \"http://${var:host}:8080/healthz\", host: 127.0.0.1}\n")
	orin := profile("orin", "  selector: {matchLabels: {hw: orin}}\n  priority: 10\n  vars: {threshold: \"0.4\", camera: \"rtsp://${label:camera-ip}/${device}\"}\n")
	dev := device("cam-017", "hw: orin, camera-ip: 10.0.0.7, site: plant-a", ""+
		"  models: [{name: det, ref: \"r.local/${label:site}/det:${var:level}\", path: \"/opt/models/${device}\"}]\n"+
		"  files:\n    - path: /etc/infer/plant-a.yaml\n      content: \"t: ${var:threshold} cam: ${var:camera} home: ${HOME} $${var:threshold} ${var:-x}\"\n      mode: \"${var:mode}\"\n"+
		"  services:\n    - name: infer\n      command: [/bin/x, \"--t=${var:threshold}\", \"--m=${model:det}/m.onnx\", \"--port=808${replica}\"]\n"+
		"      env: {LEVEL: \"${var:level}\", DEVICE: \"${device}\", CFG: \"${file:/etc/infer/plant-a.yaml}\"}\n"+
		"      workingDir: /var/lib/${device}\n      user: \"${label:site}\"\n      health: {http: \"${var:url}\"}\n      updateLock: /run/${label:site}/${device}.lock\n")
	withMode := profile("mode", "  selector: {}\n  vars: {mode: \"0600\"}\n")
	c := compose(t, files("base.yaml", base, "orin.yaml", orin, "dev.yaml", dev, "mode.yaml", withMode), nil)
	d := c.Device.Spec
	t.Run("model ref and path", func(t *testing.T) {
		require.Equal(t, "r.local/plant-a/det:info", d.Models[0].Ref)
		require.Equal(t, "/opt/models/cam-017", d.Models[0].Path)
	})
	t.Run("file path, content and mode; other ${…} kept", func(t *testing.T) {
		require.Equal(t, "/etc/infer/plant-a.yaml", d.Files[0].Path)
		require.Equal(t, "t: 0.4 cam: rtsp://10.0.0.7/cam-017 home: ${HOME} ${var:threshold} ${var:-x}", d.Files[0].Content,
			"$${ is a literal ${, and ${var:-x} (a shell's) is no variable")
		require.Equal(t, "0600", d.Files[0].Mode)
	})
	t.Run("service command, env, workingDir, user, health and update lock", func(t *testing.T) {
		s := d.Services[0]
		require.Equal(t, []string{"/bin/x", "--t=0.4", "--m=${model:det}/m.onnx", "--port=808${replica}"}, s.Command)
		require.Equal(t, map[string]string{"LEVEL": "info", "DEVICE": "cam-017", "CFG": "${file:/etc/infer/plant-a.yaml}"}, s.Env)
		require.Equal(t, "/var/lib/cam-017", s.WorkingDir)
		require.Equal(t, "plant-a", s.User)
		require.Equal(t, "http://127.0.0.1:8080/healthz", s.Health.HTTP)
		require.Equal(t, "/run/plant-a/cam-017.lock", s.UpdateLock)
	})
	t.Run("later layer's var wins, with provenance", func(t *testing.T) {
		var got []string
		for _, v := range c.Vars {
			got = append(got, v.ID+" "+v.From.Layer)
		}
		require.Equal(t, []string{"var/camera profile/orin", "var/host profile/base", "var/level profile/base", "var/mode profile/mode",
			"var/threshold profile/orin", "var/url profile/base"}, got)
		require.Equal(t, []Source{{Layer: "profile/base", File: "base.yaml", Line: 6}}, c.Vars[4].Overrode)
	})
	t.Run("expansion does not change the parsed profiles", func(t *testing.T) {
		f, err := LoadFleet(files("base.yaml", base, "orin.yaml", orin, "dev.yaml", dev, "mode.yaml", withMode,
			"dev2.yaml", strings.ReplaceAll(dev, "cam-017", "cam-018")))
		require.NoError(t, err)
		require.Equal(t, "cam-018", f.Devices["cam-018"].Device.Spec.Services[0].Env["DEVICE"])
		require.Equal(t, "cam-017", f.Devices["cam-017"].Device.Spec.Services[0].Env["DEVICE"])
	})
}

// A variable in a merge key is refused: layers merge by key before
// variables are expanded.
func TestComposeRefusesVariablesInKeys(t *testing.T) {
	p := profile("p", "  selector: {}\n  files: [{path: \"/etc/infer/${device}.yaml\", content: x}]\n")
	_, err := Compose(files("p.yaml", p), ComposeOptions{Device: "cam-017"})
	require.EqualError(t, err, "p.yaml:6: spec.files[0].path: file/etc/infer/${device}.yaml: a variable in a path is not supported: "+
		"layers are merged by it before variables are expanded; write it out (a per-device file goes in the Device document)")
}

func TestComposeBadVars(t *testing.T) {
	tests := []struct {
		name   string
		inputs []Input
		want   []string
	}{
		{"undefined var", files("p.yaml", profile("p", "  selector: {}\n  vars: {a: x}\n  services:\n    - name: infer\n      command: [/bin/x, \"${var:nope}\"]\n")),
			[]string{`p.yaml:9: spec.services[0].command[1]: service/infer: ${var:nope} is not defined: no profile that applies to this device sets it; add it to a profile's vars`}},
		{"undefined label", files("d.yaml", device("cam-017", "hw: orin", "  files:\n    - {path: /etc/infer/a, content: \"${label:site}\"}\n")),
			[]string{`d.yaml:6: spec.files[0].content: file/etc/infer/a: ${label:site} is not defined: the device has no label "site"; set it in the agent config's labels or the Device document`}},
		{"undefined label inside a var", files("p.yaml", profile("p", "  selector: {}\n  vars: {cam: \"rtsp://${label:camera-ip}/\"}\n  models: [{name: m, ref: \"r.local/m:v1\", path: \"/opt/models/${var:cam}\"}]\n")),
			[]string{`p.yaml:7: spec.models[0].path: model/m: ${var:cam} (p.yaml:6) uses ${label:camera-ip} is not defined: the device has no label "camera-ip"; set it in the agent config's labels or the Device document`}},
		{"loop", files("p.yaml", profile("p", "  selector: {}\n  vars:\n    b: \"${var:a}\"\n    a: \"x${var:b}\"\n    c: \"${var:c}\"\n  files: [{path: /etc/infer/a, content: \"${var:a}\"}]\n")),
			[]string{`p.yaml:8: spec.vars.a: variables refer to each other in a loop: a → b → a; break the loop`,
				`p.yaml:9: spec.vars.c: variables refer to each other in a loop: c → c; break the loop`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compose(tt.inputs, ComposeOptions{Device: "cam-017", ValidateOptions: allow})
			require.ErrorIs(t, err, ErrInvalid)
			require.Equal(t, strings.Join(tt.want, "\n"), err.Error())
		})
	}
}

func TestComposeTies(t *testing.T) {
	a := profile("a", "  selector: {}\n  priority: 5\n  vars: {v: \"1\"}\n  files: [{path: /etc/infer/x, content: a}]\n")
	t.Run("different content at equal priority names both", func(t *testing.T) {
		b := profile("b", "  selector: {}\n  priority: 5\n  vars: {v: \"2\"}\n  files: [{path: /etc/infer/x, content: b}]\n")
		_, err := Compose(files("pa.yaml", a, "pb.yaml", b), ComposeOptions{Device: "cam-017", ValidateOptions: allow})
		require.ErrorIs(t, err, ErrInvalid)
		require.Equal(t, "pb.yaml:7: spec.vars.v: var/v is set differently by profile/a (pa.yaml:7) and by profile/b (pb.yaml:7), both of priority 5: give one of them a lower priority, or make them equal\n"+
			"pb.yaml:8: spec.files[0].path: file/etc/infer/x is set differently by profile/a (pa.yaml:8) and by profile/b (pb.yaml:8), both of priority 5: give one of them a lower priority, or make them equal",
			err.Error())
	})
	t.Run("absent against a declaration at equal priority", func(t *testing.T) {
		b := profile("b", "  selector: {}\n  priority: 5\n  files: [{path: /etc/infer/x, absent: true}]\n")
		_, err := Compose(files("pa.yaml", a, "pb.yaml", b), ComposeOptions{Device: "cam-017", ValidateOptions: allow})
		require.ErrorContains(t, err, "file/etc/infer/x is set differently by profile/a")
	})
	t.Run("equal content at equal priority is fine", func(t *testing.T) {
		b := profile("b", "  selector: {}\n  priority: 5\n  vars: {v: \"1\"}\n  files:\n    - path: /etc/infer/x\n      content: a\n")
		c := compose(t, files("pa.yaml", a, "pb.yaml", b), nil)
		require.Equal(t, "a", fileContents(c.Device)["/etc/infer/x"])
	})
	t.Run("different priorities are no tie", func(t *testing.T) {
		b := profile("b", "  selector: {}\n  priority: 6\n  files: [{path: /etc/infer/x, content: b}]\n")
		c := compose(t, files("pa.yaml", a, "pb.yaml", b), nil)
		require.Equal(t, "b", fileContents(c.Device)["/etc/infer/x"])
	})
}

func TestComposeDeviceDocuments(t *testing.T) {
	all := profile("all", "  selector: {}\n  files: [{path: /etc/infer/all, content: x}]\n")
	other := device("cam-018", "", "  files: [{path: /etc/passwd, content: bad}]\n")
	t.Run("another device's document is ignored", func(t *testing.T) {
		c := compose(t, files("all.yaml", all, "devices/cam-018.yaml", other), nil)
		require.Equal(t, []string{"profile/all"}, ids(c))
	})
	t.Run("another device's broken document is ignored", func(t *testing.T) {
		compose(t, files("all.yaml", all, "devices/cam-018.yaml", device("cam-018", "", "  files: [{path: [x]}]\n")), nil)
	})
	t.Run("in a per-device path it is an error", func(t *testing.T) {
		in := files("all.yaml", all)
		in = append(in, Input{Name: "devices/cam-017/x.yaml", Data: []byte(other), PerDevice: true})
		_, err := Compose(in, ComposeOptions{Device: "cam-017", ValidateOptions: allow})
		require.ErrorIs(t, err, ErrInvalid)
		require.Equal(t, `devices/cam-017/x.yaml:3: metadata.name: this document is for device "cam-018" but it was read for device "cam-017"; move it to that device's path or fix the name`, err.Error())
	})
	t.Run("several documents of the device merge", func(t *testing.T) {
		c := compose(t, files("all.yaml", all, "a.yaml", device("cam-017", "a: x", "  files: [{path: /etc/infer/a, content: a}]\n"),
			"b.yaml", device("cam-017", "b: y", "  files: [{path: /etc/infer/b, content: b}]\n")), nil)
		require.Len(t, c.Device.Spec.Files, 3)
		require.Equal(t, []string{"profile/all", "device/cam-017", "device/cam-017"}, ids(c))
	})
	t.Run("a key twice in the device's documents is an error", func(t *testing.T) {
		_, err := Compose(files("a.yaml", device("cam-017", "", "  files: [{path: /etc/infer/a, content: a}]\n"),
			"b.yaml", device("cam-017", "", "  files: [{path: /etc/infer/a, content: b}]\n")), ComposeOptions{Device: "cam-017", ValidateOptions: allow})
		require.EqualError(t, err, "b.yaml:5: spec.files[0].path: file/etc/infer/a is declared twice (first at a.yaml:5); names must be unique per device")
	})
	t.Run("the merged device is validated at the item's layer", func(t *testing.T) {
		bad := profile("bad", "  selector: {}\n  files: [{path: /etc/passwd, content: x}]\n")
		_, err := Compose(files("bad.yaml", bad), ComposeOptions{Device: "cam-017", ValidateOptions: allow})
		require.ErrorContains(t, err, `bad.yaml:6: spec.files[0].path: "/etc/passwd" is outside allowPaths`)
	})
}

func TestComposeLabels(t *testing.T) {
	orin := profile("orin", "  selector: {matchLabels: {hw: orin}}\n  files: [{path: /etc/infer/site, content: \"${label:site}\"}]\n")
	t.Run("config labels select profiles", func(t *testing.T) {
		c := compose(t, files("orin.yaml", orin), map[string]string{"hw": "orin", "site": "a"})
		require.Equal(t, "a", fileContents(c.Device)["/etc/infer/site"])
		require.Equal(t, []Label{{Key: "hw", Value: "orin", From: agentConfig}, {Key: "site", Value: "a", From: agentConfig}}, c.Labels)
	})
	t.Run("Git wins over the config, and says so", func(t *testing.T) {
		c := compose(t, files("orin.yaml", orin, "d.yaml", device("cam-017", "site: b", "")), map[string]string{"hw": "orin", "site": "a"})
		require.Equal(t, "b", fileContents(c.Device)["/etc/infer/site"])
		require.Equal(t, Label{Key: "site", Value: "b", From: Source{Layer: "device/cam-017", File: "d.yaml", Line: 3}, ConfigValue: "a", Overridden: true}, c.Labels[1])
		require.Equal(t, map[string]string{"hw": "orin", "site": "b"}, c.Device.Metadata.Labels)
	})
	t.Run("a Git label can move a device out of a profile", func(t *testing.T) {
		_, err := Compose(files("orin.yaml", orin), ComposeOptions{Device: "cam-017", Labels: map[string]string{"hw": "x86"}})
		require.EqualError(t, err, `no Device document for "cam-017" and no profile matches its labels (hw=x86) in 1 manifest files (1 profiles): add a Device document for it, or give it the labels a profile selects`)
	})
	t.Run("two Device documents disagreeing on a label", func(t *testing.T) {
		_, err := Compose(files("a.yaml", device("cam-017", "site: a", ""), "b.yaml", device("cam-017", "site: b", "")), ComposeOptions{Device: "cam-017"})
		require.EqualError(t, err, `b.yaml:3: metadata.labels.site: label site is "b" here but "a" in a.yaml`)
	})
	t.Run("nothing applies, no labels", func(t *testing.T) {
		_, err := Compose(files("orin.yaml", orin), ComposeOptions{Device: "cam-017"})
		require.ErrorIs(t, err, ErrInvalid)
		require.ErrorContains(t, err, `no Device document for "cam-017" and no profile matches its labels (none)`)
	})
}

// The explanation render --explain prints: labels, layers, every resource
// and variable with where it came from and what it overrode, warnings.
func TestWriteExplain(t *testing.T) {
	base := profile("base", "  selector: {}\n  vars: {threshold: \"0.3\", level: info}\n"+
		"  models: [{name: detector, ref: r.local/detector:v7}, {name: old, ref: r.local/old:v1}]\n"+
		"  files:\n    - path: /etc/infer/config.yaml\n      content: \"threshold: ${var:threshold}\"\n"+
		"  services: [{name: infer, command: [\"/bin/infer\", \"--model=${model:detector}\", \"--log=${var:level}\"]}]\n")
	orin := profile("orin-inference", "  selector:\n    matchLabels: {hw: orin}\n    matchExpressions: [{key: site, operator: In, values: [plant-a, plant-b]}]\n  priority: 10\n"+
		"  vars: {threshold: \"0.4\"}\n"+
		"  files:\n    - path: /etc/infer/config.yaml\n      content: \"threshold: ${var:threshold}\\nsite: ${label:site}\\n\"\n")
	dev := device("cam-017", "site: plant-a", "  models:\n    - {name: detector, ref: r.local/detector:v8}\n    - {name: old, absent: true}\n    - {name: never, absent: true}\n")
	c := compose(t, files("profiles/base.yaml", base, "profiles/orin.yaml", orin, "devices/cam-017/device.yaml", dev),
		map[string]string{"hw": "orin", "site": "plant-b", "room": "3"})
	var b bytes.Buffer
	require.NoError(t, c.WriteExplain(&b))
	golden.Assert(t, "explain.golden", b.Bytes())
}

// Load keeps reading a device's own folder as before: a Device document
// there must name the device, and profiles among the files apply.
func TestLoadWithProfiles(t *testing.T) {
	all := profile("all", "  selector: {}\n  files: [{path: /etc/infer/all, content: \"${device}\"}]\n")
	d, err := Load("cam-017", files("all.yaml", all))
	require.NoError(t, err)
	require.Equal(t, "cam-017", d.Spec.Files[0].Content)
	_, err = Load("cam-017", files("d.yaml", device("cam-018", "", "")))
	require.ErrorContains(t, err, `this document is for device "cam-018"`)
}

func TestLoadFleet(t *testing.T) {
	orin := profile("orin", "  selector: {matchLabels: {hw: orin}}\n  models: [{name: det, ref: r.local/det:v1}]\n")
	uses := "  services: [{name: s, command: [\"${model:det}/run\"]}]\n"
	f, err := LoadFleet(files("orin.yaml", orin, "a.yaml", device("cam-a", "hw: orin", uses), "b.yaml", device("cam-b", "hw: x86", "")))
	require.NoError(t, err)
	require.Len(t, f.Profiles, 1)
	require.Equal(t, "orin.yaml", f.Profiles[0].Origin.File)
	require.Len(t, f.Devices["cam-a"].Device.Spec.Models, 1, "a device in Git gets the profiles its Git labels select")
	require.Empty(t, f.Devices["cam-b"].Device.Spec.Models)
	devices, err := LoadDevices(files("orin.yaml", orin, "a.yaml", device("cam-a", "hw: orin", uses)), allow)
	require.NoError(t, err, "a reference to a profile's model validates")
	require.Contains(t, devices, "cam-a")
}

// TestComposeBoundsExpansion: variables used in variables multiply (a 1 KB
// profile of 28 doubling variables asks for 16 GB); each expanded string
// and a device's expanded resources have a budget, and going over it is an
// error that names the variable, not an out-of-memory death.
func TestComposeBoundsExpansion(t *testing.T) {
	doubling := "  selector: {}\n  vars:\n    v00: \"" + strings.Repeat("x", 64) + "\"\n"
	for i := 1; i <= 28; i++ {
		doubling += fmt.Sprintf("    v%02d: \"${var:v%02d}${var:v%02d}\"\n", i, i-1, i-1)
	}
	doubling += "  files: [{path: /etc/infer/a, content: \"${var:v28}\"}]\n"
	chain := ""
	for i := 28; i > 15; i-- {
		chain += fmt.Sprintf("${var:v%02d} (p.yaml:%d) uses ", i, i+7)
	}
	big := strings.Repeat("y", 600<<10)
	many := "  selector: {}\n  vars: {big: \"" + big + "\"}\n  files:\n"
	for i := range 60 {
		many += fmt.Sprintf("    - {path: /etc/infer/f%02d, content: \"${var:big}\"}\n", i)
	}
	tests := []struct {
		name   string
		inputs []Input
		want   string
	}{
		{"a variable doubled 28 times", files("p.yaml", profile("p", doubling)),
			"p.yaml:36: spec.files[0].content: file/etc/infer/a: " + chain + "${var:v15} (p.yaml:22) expands to more than 1 MiB " +
				"(variables used in variables multiply); a string with every variable in it expanded is at most 1 MiB: put large content in a model artifact"},
		{"one field that repeats a large variable", files("p.yaml", profile("p", "  selector: {}\n  vars: {big: \""+big+"\"}\n"+
			"  files: [{path: /etc/infer/a, content: \"${var:big}${var:big}\"}]\n")),
			"p.yaml:7: spec.files[0].content: file/etc/infer/a: expands to more than 1 MiB (variables used in variables multiply); " +
				"a string with every variable in it expanded is at most 1 MiB: put large content in a model artifact"},
		{"a device whose resources add up past the budget", files("p.yaml", profile("p", many)),
			"p.yaml:62: spec.files[54].content: file/etc/infer/f54: the device's resources expand to more than 32 MiB in all; put large content in a model artifact"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compose(tt.inputs, ComposeOptions{Device: "cam-017", ValidateOptions: allow})
			require.ErrorIs(t, err, ErrInvalid)
			require.Equal(t, tt.want, err.Error())
		})
	}
}
