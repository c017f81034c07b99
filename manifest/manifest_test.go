package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const good = `apiVersion: tend.dev/v1alpha1
kind: Device
metadata:
  name: cam-017
  labels: {site: plant-a, hw: orin}
spec:
  models:
    - name: detector
      ref: registry.local:5000/models/detector:v8
      path: /opt/models/detector
    - name: classifier
      ref: registry.local:5000/models/classifier
      policy: {semver: ">=8.0.0 <9"}
  files:
    - path: /etc/infer/config.yaml
      content: |
        threshold: 0.4
      mode: "0644"
  services:
    - name: infer
      command: ["/opt/infer/bin/server", "--model", "${model:detector}/model.onnx", "--port", "808${replica}"]
      env: {LOG_LEVEL: info, CONFIG: "${file:/etc/infer/config.yaml}"}
      restart: always
      replicas: 2
      resources: {memory: 512Mi, cpu: "1.5"}
      health:
        http: http://127.0.0.1:8080/healthz
        startupGrace: 10s
      restartOn: [file:/etc/infer/config.yaml]
      updateLock: /run/infer/update.lock
`

var allow = ValidateOptions{AllowPaths: []string{"/etc/infer", "/opt/models"}, CheckAllowPaths: true}

func TestLoadAndValidateGood(t *testing.T) {
	d, err := Load("cam-017", []Input{{Name: "devices/cam-017/device.yaml", Data: []byte(good)}})
	require.NoError(t, err)
	require.NoError(t, d.Validate(allow))
	require.Equal(t, "cam-017", d.Metadata.Name)
	require.Len(t, d.Spec.Models, 2)
	require.Equal(t, "threshold: 0.4\n", d.Spec.Files[0].Content)
	require.Equal(t, 2, *d.Spec.Services[0].Replicas)
	require.Equal(t, "10s", d.Spec.Services[0].Health.StartupGrace.D().String())
	require.Equal(t, "/run/infer/update.lock", d.Spec.Services[0].UpdateLock, "an update lock need not be under allowPaths: tend only reads it")
	require.Equal(t, "spec.files[0]", d.Spec.Files[0].Origin.Field)
	require.Equal(t, 15, d.Spec.Files[0].Origin.Line(".path"))
}

func TestLoadMergesDocumentsAndFiles(t *testing.T) {
	a := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017, labels: {site: a}}\nspec:\n  files:\n    - {path: /etc/infer/a, content: a}\n---\n---\napiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n    - {path: /etc/infer/b, content: b}\n"
	b := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017, labels: {hw: orin}}\nspec:\n  files:\n    - {path: /etc/infer/c, content: c}\n"
	d, err := Load("cam-017", []Input{{Name: "z.yml", Data: []byte(b)}, {Name: "a.yaml", Data: []byte(a)}})
	require.NoError(t, err)
	require.NoError(t, d.Validate(allow))
	var paths []string
	for _, f := range d.Spec.Files {
		paths = append(paths, f.Origin.File+":"+f.Path)
	}
	require.Equal(t, []string{"a.yaml:/etc/infer/a", "a.yaml:/etc/infer/b", "z.yml:/etc/infer/c"}, paths)
	require.Equal(t, map[string]string{"site": "a", "hw": "orin"}, d.Metadata.Labels)
}

func TestBadInput(t *testing.T) {
	header := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"
	tests := []struct {
		name string
		doc  string
		want string // every line of the error must contain one of these, in order
	}{
		{"malformed yaml", header + "  files: [\n", "d.yaml:5: malformed YAML"},
		{"tab indentation", header + "  files:\n\t- path: /etc/infer/a\n", "d.yaml:6: tabs are not allowed in YAML indentation; use spaces"},
		{"bad indent is at its line", header + "  files:\n    - path: /etc/infer/a\n      content: x\n     mode: \"0644\"\n", `d.yaml:8: malformed YAML: did not find expected '-' indicator: check this line's indentation`},
		{"bad indent of an item", header + "  files:\n  - path: /etc/infer/a\n    content: x\n   - path: /etc/infer/b\n", `d.yaml:8: malformed YAML: did not find expected key: check this line's indentation`},
		{"unknown field", header + "  files:\n    - path: /etc/infer/a\n      contnet: x\n", `d.yaml:7: spec.files[0]: unknown field "contnet"`},
		{"unknown field suggests case", header + "  files:\n    - Path: /etc/infer/a\n", `unknown field "Path" (did you mean "path"?)`},
		{"unknown top-level field", header + "  files: []\nstatus: {}\n", `d.yaml:6: unknown field "status"`},
		{"wrong type", header + "  files:\n    - path: [a]\n", "d.yaml:6: spec.files[0].path: must be a string, got a list"},
		{"wrong kind", "apiVersion: tend.dev/v1alpha1\nkind: Devices\n", `d.yaml:1: expected apiVersion: tend.dev/v1alpha1 and kind: Device, Profile or Rollout, got apiVersion: "tend.dev/v1alpha1", kind: "Devices"`},
		{"command and image", header + "  services:\n    - {name: s, image: r.local/triton:1, command: [x]}\n", `d.yaml:6: spec.services[0].image: set either command (a process) or image (a container), not both`},
		{"bad image", header + "  services:\n    - {name: s, image: \"r.local/Triton:1\"}\n", `spec.services[0].image: invalid image reference "r.local/Triton:1"`},
		{"container field on a process", header + "  services:\n    - {name: s, command: [x], network: none}\n", `spec.services[0].network: is for a container (a service with image:)`},
		{"mount outside allowPaths", header + "  services:\n    - {name: s, image: r.local/t:1, mounts: [{source: /etc/shadow, target: /x}]}\n", `spec.services[0].mounts[0].source: "/etc/shadow" is outside allowPaths [/etc/infer /opt/models]`},
		{"mount of an undeclared model", header + "  services:\n    - {name: s, image: r.local/t:1, mounts: [{source: \"${model:nope}\", target: /models}]}\n", `spec.services[0].mounts[0].source: references model "nope", which this device does not declare`},
		{"mount source part reference", header + "  models:\n    - {name: m, ref: r.local/m:v1}\n  services:\n    - {name: s, image: r.local/t:1, mounts: [{source: \"${model:m}/sub\", target: /models}]}\n", `spec.services[0].mounts[0].source: "${model:m}/sub": a reference is the whole source`},
		{"relative mount target", header + "  services:\n    - {name: s, image: r.local/t:1, mounts: [{source: /etc/infer/a, target: models}]}\n", `spec.services[0].mounts[0].target: "models": use a clean absolute path inside the container`},
		{"two mounts on one target", header + "  services:\n    - {name: s, image: r.local/t:1, mounts: [{source: /etc/infer/a, target: /m}, {source: /etc/infer/b, target: /m}]}\n", `spec.services[0].mounts[1].target: "/m" is the target of mounts[0] too`},
		{"bad network", header + "  services:\n    - {name: s, image: r.local/t:1, network: overlay}\n", `spec.services[0].network: invalid network "overlay": use host, none or bridge`},
		{"bad device", header + "  services:\n    - {name: s, image: r.local/t:1, devices: [nvidia0]}\n", `spec.services[0].devices[0]: "nvidia0": use a device node of the host, such as /dev/nvidia0`},
		{"bad gpus", header + "  services:\n    - {name: s, image: r.local/t:1, gpus: some}\n", `spec.services[0].gpus: invalid gpus "some": use all or a count`},
		{"exec probe in a container", header + "  services:\n    - {name: s, image: r.local/t:1, health: {exec: [true]}}\n", `spec.services[0].health.exec: is not supported for a container yet`},
		{"other device", strings.Replace(header, "cam-017", "cam-018", 1) + "  files: []\n", `d.yaml:3: metadata.name: this document is for device "cam-018"`},
		{"relative path", header + "  files:\n    - {path: etc/infer/a, content: x}\n", `d.yaml:6: spec.files[0].path: "etc/infer/a" is relative`},
		{"newline in path", header + "  files:\n    - {path: \"/etc/infer/a\\n+ file/etc/infer/b\", content: x}\n", `d.yaml:6: spec.files[0].path: "/etc/infer/a\n+ file/etc/infer/b" holds a control character`},
		{"escape in model path", header + "  models:\n    - {name: m, ref: r.local/m:v1, path: \"/opt/models/\\e[2Km\"}\n", `spec.models[0].path: "/opt/models/\x1b[2Km" holds a control character`},
		{"tab in path", header + "  files:\n    - {path: \"/etc/infer/a\\tb\", content: x}\n", `spec.files[0].path: "/etc/infer/a\tb" holds a control character`},
		{"escaping path", header + "  files:\n    - {path: /etc/infer/../passwd, content: x}\n", `spec.files[0].path: "/etc/infer/../passwd" is not a clean path`},
		{"outside allowPaths", header + "  files:\n    - {path: /etc/passwd, content: x}\n", `spec.files[0].path: "/etc/passwd" is outside allowPaths [/etc/infer /opt/models]`},
		{"a file at an allowPaths entry", header + "  files:\n    - {path: /etc/infer, content: x}\n", `d.yaml:6: spec.files[0].path: "/etc/infer" is an allowPaths entry itself; declare a path under it, such as /etc/infer/NAME`},
		{"a model at an allowPaths entry", header + "  models:\n    - {name: m, ref: r.local/m:v1, path: /opt/models}\n", `d.yaml:6: spec.models[0].path: "/opt/models" is an allowPaths entry itself`},
		{"prefix is not a parent", header + "  files:\n    - {path: /etc/inferx/a, content: x}\n", `is outside allowPaths`},
		{"bad mode", header + "  files:\n    - {path: /etc/infer/a, content: x, mode: \"999\"}\n", `d.yaml:6: spec.files[0].mode: invalid mode "999"`},
		{"duplicate file", header + "  files:\n    - {path: /etc/infer/a, content: x}\n    - {path: /etc/infer/a, content: y}\n", `d.yaml:7: spec.files[1].path: file/etc/infer/a is declared twice (first at d.yaml:6)`},
		{"duplicate model", header + "  models:\n    - {name: m, ref: r.local/m:v1}\n    - {name: m, ref: r.local/m:v2}\n", `spec.models[1].name: model/m is declared twice`},
		{"bad model ref", header + "  models:\n    - {name: m, ref: \"r.local/M:v1\"}\n", `spec.models[0].ref: invalid OCI reference "r.local/M:v1"`},
		{"model ref without tag", header + "  models:\n    - {name: m, ref: r.local/m}\n", `has no tag or digest`},
		{"policy with tag", header + "  models:\n    - {name: m, ref: r.local/m:v1, policy: {semver: \">=1\"}}\n", `pins a tag or digest`},
		{"bad semver", header + "  models:\n    - {name: m, ref: r.local/m, policy: {semver: \"banana\"}}\n", `spec.models[0].policy.semver: invalid semver range "banana"`},
		{"model verify with a relative key", header + "  models:\n    - {name: m, ref: r.local/m:1, verify: {cosign: {keys: [k.pub]}}}\n", `spec.models[0].verify.cosign.keys[0]: "k.pub" must be the absolute path of a PEM public key`},
		{"verify of a process service", header + "  services:\n    - {name: s, command: [/bin/true], verify: {cosign: {keys: [/k.pub]}}}\n", `spec.services[0].verify: checks the signature of a container image and the service has no image:`},
		{"include climbs out", header + "  models:\n    - {name: m, ref: r.local/m:v1, include: [\"*.gguf\", \"../etc/*\"]}\n", `d.yaml:6: spec.models[0].include[1]: "../etc/*" climbs out with ".."`},
		{"absolute include", header + "  models:\n    - {name: m, ref: r.local/m:v1, include: [/weights]}\n", `spec.models[0].include[0]: "/weights" is absolute`},
		{"unclean include", header + "  models:\n    - {name: m, ref: r.local/m:v1, include: [\"weights//*.bin\"]}\n", `spec.models[0].include[0]: "weights//*.bin" is not a clean path ("weights/*.bin")`},
		{"bad include glob", header + "  models:\n    - {name: m, ref: r.local/m:v1, include: [\"[a-\"]}\n", `spec.models[0].include[0]: "[a-" is not a valid glob`},
		{"empty include pattern", header + "  models:\n    - {name: m, ref: r.local/m:v1, include: [\"\"]}\n", `spec.models[0].include[0]: "" is empty`},
		{"include listed twice", header + "  models:\n    - {name: m, ref: r.local/m:v1, include: [\"*.gguf\", \"*.gguf\"]}\n", `spec.models[0].include[1]: "*.gguf" is include[0] too`},
		{"bad memory", header + "  services:\n    - {name: s, command: [x], resources: {memory: 12XB}}\n", `spec.services[0].resources.memory: invalid memory quantity "12XB"`},
		{"bad cpu", header + "  services:\n    - {name: s, command: [x], resources: {cpu: lots}}\n", `spec.services[0].resources.cpu: invalid cpu quantity "lots"`},
		{"undeclared model reference", header + "  services:\n    - {name: s, command: [\"${model:nope}/x\"]}\n", `spec.services[0].command[0]: references model "nope", which this device does not declare`},
		{"undeclared file reference", header + "  services:\n    - {name: s, command: [x], restartOn: [\"file:/etc/infer/x\"]}\n", `spec.services[0].restartOn[0]: references file "/etc/infer/x"`},
		{"unknown reference", header + "  services:\n    - {name: s, command: [\"${secret:x}\"]}\n", `unknown reference "secret:x"`},
		{"bad restart", header + "  services:\n    - {name: s, command: [x], restart: sometimes}\n", `spec.services[0].restart: invalid restart policy "sometimes"`},
		{"two health probes", header + "  services:\n    - {name: s, command: [x], health: {tcp: \"127.0.0.1:1\", exec: [true]}}\n", `spec.services[0].health: set exactly one of http, tcp or exec (found 2)`},
		{"bad duration", header + "  services:\n    - {name: s, command: [x], health: {tcp: \"127.0.0.1:1\", startupGrace: 10}}\n", `spec.services[0].health.startupGrace: invalid duration "10"`},
		{"missing command", header + "  services:\n    - {name: s}\n", `spec.services[0].command: missing`},
		{"bad name", header + "  services:\n    - {name: Bad_Name!, command: [x]}\n", `spec.services[0].name: invalid name "Bad_Name!"`},
		{"replicas not an integer", header + "  services:\n    - {name: s, command: [x], replicas: two}\n", `spec.services[0].replicas: must be an integer, got "two"`},
		{"probe port not a number", header + "  services:\n    - {name: s, command: [x], health: {http: \"http://127.0.0.1:port/healthz\"}}\n", `spec.services[0].health.http: invalid URL "http://127.0.0.1:port/healthz": invalid port ":port" after host`},
		{"probe port past 65535 for the last replica", header + "  services:\n    - {name: s, command: [x], replicas: 12, health: {http: \"http://127.0.0.1:6553${replica}/healthz\"}}\n", `invalid URL "http://127.0.0.1:6553${replica}/healthz" (expanded: "http://127.0.0.1:655311/healthz"): port "655311" is not a number from 1 to 65535`},
		{"probe without scheme", header + "  services:\n    - {name: s, command: [x], health: {http: \"127.0.0.1:8080/healthz\"}}\n", `spec.services[0].health.http: invalid URL "127.0.0.1:8080/healthz"`},
		{"tcp probe port", header + "  services:\n    - {name: s, command: [x], health: {tcp: \"127.0.0.1:http${replica}\"}}\n", `spec.services[0].health.tcp: invalid address "127.0.0.1:http${replica}" (expanded: "127.0.0.1:http0")`},
		{"undeclared model in a probe", header + "  services:\n    - {name: s, command: [x], health: {exec: [\"${model:nope}/check\"]}}\n", `spec.services[0].health.exec[0]: references model "nope", which this device does not declare`},
		{"relative update lock", header + "  services:\n    - {name: s, command: [x], updateLock: run/infer/update.lock}\n", `d.yaml:6: spec.services[0].updateLock: "run/infer/update.lock" is relative`},
		{"unclean update lock", header + "  services:\n    - {name: s, command: [x], updateLock: /run/infer/../update.lock}\n", `spec.services[0].updateLock: "/run/infer/../update.lock" is not a clean path (write it as "/run/update.lock"`},
		{"update lock with a trailing slash", header + "  services:\n    - {name: s, command: [x], updateLock: /run/infer/}\n", `spec.services[0].updateLock: "/run/infer/" is not a clean path`},
		{"update lock with a reference", header + "  models:\n    - {name: m, ref: r.local/m:v1}\n  services:\n    - {name: s, command: [x], updateLock: \"${model:m}/lock\"}\n", `spec.services[0].updateLock: "${model:m}/lock" holds a reference`},
		{"negative replicas", header + "  services:\n    - {name: s, command: [x], replicas: -1}\n", `spec.services[0].replicas: must be 0 or more, got -1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Load("cam-017", []Input{{Name: "d.yaml", Data: []byte(tt.doc)}})
			if err == nil {
				err = d.Validate(allow)
			}
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrInvalid), "error must match ErrInvalid: %v", err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

// A health probe may use ${replica} and references anywhere, the port
// included: it is checked as every replica runs it.
func TestProbeExpansions(t *testing.T) {
	header := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files: [{path: /etc/infer/ready, content: x}]\n  services:\n"
	for _, health := range []string{
		`{http: "http://127.0.0.1:808${replica}/healthz"}`,
		`{http: "http://127.0.0.1:8080/replica-${replica}"}`,
		`{http: "http://host-${replica}.local:80/${file:/etc/infer/ready}"}`,
		`{tcp: "127.0.0.1:90${replica}"}`,
		`{tcp: ":9000"}`,
		`{exec: ["/bin/test", "-f", "${file:/etc/infer/ready}"]}`,
	} {
		t.Run(health, func(t *testing.T) {
			doc := header + "    - {name: s, command: [x], replicas: 2, health: " + health + "}\n"
			d, err := Load("cam-017", []Input{{Name: "d.yaml", Data: []byte(doc)}})
			require.NoError(t, err)
			require.NoError(t, d.Validate(allow))
		})
	}
}

// A tab inside a block scalar's text is content, not indentation.
func TestTabInContentIsFine(t *testing.T) {
	doc := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n    - path: /etc/infer/a\n      content: |\n        a\n        \tb\n"
	d, err := Load("cam-017", []Input{{Name: "d.yaml", Data: []byte(doc)}})
	require.NoError(t, err)
	require.Equal(t, "a\n\tb\n", d.Spec.Files[0].Content)
}

func TestValidateReportsEveryProblem(t *testing.T) {
	doc := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n    - {path: etc/a, content: x}\n    - {path: /etc/infer/b, content: x, mode: \"8\"}\n"
	d, err := Load("cam-017", []Input{{Name: "d.yaml", Data: []byte(doc)}})
	require.NoError(t, err)
	err = d.Validate(allow)
	var errs Errors
	require.ErrorAs(t, err, &errs)
	require.Len(t, errs, 2)
	require.Equal(t, 6, errs[0].Line)
	require.Equal(t, 7, errs[1].Line)
}

func TestUnquotedModeKeepsItsDigits(t *testing.T) {
	doc := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n    - {path: /etc/infer/a, content: x, mode: 0600}\n"
	d, err := Load("cam-017", []Input{{Name: "d.yaml", Data: []byte(doc)}})
	require.NoError(t, err)
	require.Equal(t, "0600", d.Spec.Files[0].Mode)
	m, err := ParseMode(d.Spec.Files[0].Mode)
	require.NoError(t, err)
	require.Equal(t, uint32(0o600), m)
}

func TestLoadWithoutDeviceDocument(t *testing.T) {
	_, err := Load("cam-017", []Input{{Name: "d.yaml", Data: []byte("# nothing\n---\n")}})
	require.ErrorContains(t, err, `no Device document for "cam-017"`)
}

func TestQuantities(t *testing.T) {
	for in, want := range map[string]int64{"512Mi": 512 << 20, "1G": 1e9, "1048576": 1 << 20, "1.5Gi": 3 << 29} {
		got, err := ParseMemory(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, want := range map[string]int64{"1.5": 1500, "500m": 500, "2": 2000} {
		got, err := ParseCPU(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "-1", "1.5.2", "0", "1e3"} {
		_, err := ParseMemory(bad)
		require.Error(t, err, bad)
	}
}

// Rates are bytes per second with a unit and "/s"; a bad one says what
// is wrong and shows one that works.
func TestParseRate(t *testing.T) {
	for in, want := range map[string]int64{
		"2MiB/s": 2 << 20, "500KiB/s": 500 << 10, "1MB/s": 1e6, "1.5MiB/s": 3 << 19,
		"64kB/s": 64e3, "64KB/s": 64e3, "1GiB/s": 1 << 30, "2GB/s": 2e9, "1024B/s": 1024, "1B/s": 1,
	} {
		got, err := ParseRate(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got.BytesPerSecond(), in)
		require.Equal(t, in, got.String(), in)
	}
	for in, want := range map[string]string{
		"":               `invalid rate "": use bytes per second, a number with a unit (B, kB, MB, GB, KiB, MiB, GiB) and "/s", e.g. "2MiB/s" or "500KiB/s"`,
		"2MiB":           `invalid rate "2MiB": use bytes per second`,
		"2 MiB/s":        `invalid rate "2 MiB/s": use bytes per second`,
		"2mib/s":         `invalid rate "2mib/s"`,
		"2Mbit/s":        `invalid rate "2Mbit/s"`,
		"-1MiB/s":        `invalid rate "-1MiB/s"`,
		"1e6B/s":         `invalid rate "1e6B/s"`,
		"fast":           `invalid rate "fast"`,
		"0MiB/s":         `invalid rate "0MiB/s": must be at least 1B/s; leave it out for no cap`,
		"0.5B/s":         `invalid rate "0.5B/s": must be at least 1B/s`,
		"9999999999GB/s": `invalid rate "9999999999GB/s": out of range`,
	} {
		_, err := ParseRate(in)
		require.ErrorContains(t, err, want, in)
	}
	require.Zero(t, Rate{}.BytesPerSecond(), "no rate, no cap")
}

// A rate reads and writes as it is written; the zero Rate is left out.
func TestRateJSON(t *testing.T) {
	var d Downloads
	require.NoError(t, json.Unmarshal([]byte(`{"maxRate":"500KiB/s"}`), &d))
	require.Equal(t, int64(500<<10), d.MaxRate.BytesPerSecond())
	b, err := json.Marshal(d)
	require.NoError(t, err)
	require.JSONEq(t, `{"maxRate":"500KiB/s"}`, string(b))
	b, err = json.Marshal(Downloads{})
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(b), "no cap, no field")
	require.NoError(t, json.Unmarshal([]byte(`{"maxRate":""}`), &d))
	require.True(t, d.MaxRate.IsZero())
	err = json.Unmarshal([]byte(`{"maxRate":"fast"}`), &d)
	require.ErrorContains(t, err, `invalid rate "fast": use bytes per second`)
}

func TestHostileYAML(t *testing.T) {
	header := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\n"
	// 2,000 services, each with the same 100-argument command, from a
	// file of a few kilobytes: 200,000 nodes once the aliases expand.
	bomb := header + "spec:\n  services:\n  - &svc\n    name: s\n    command: &cmd [" +
		strings.TrimSuffix(strings.Repeat("&a x,", 1)+strings.Repeat("*a,", 99), ",") + "]\n" +
		strings.Repeat("  - *svc\n", 1999)
	// 1,000 aliases of one 500 KB string: few nodes, 500 MB once expanded.
	wide := header + "spec:\n  services:\n  - name: s\n    command: [&big " + strings.Repeat("y", 500<<10) + ", " +
		strings.TrimSuffix(strings.Repeat("*big, ", 1000), ", ") + "]\n"
	tests := []struct{ name, doc, want string }{
		{"duplicate key drops nothing silently", header + "spec:\n  files: [{path: /etc/infer/a, content: a}]\nspec:\n  files: []\n", `d.yaml:6: duplicate key "spec" (first at line 4)`},
		{"duplicate label", header + "spec: {}\n---\n" + "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017, labels: {a: x, a: y}}\n", `duplicate key "a"`},
		{"alias bomb", bomb, "expands to more than 100000 nodes"},
		{"aliases of one large string", wide, fmt.Sprintf("d.yaml:7: spec.services[0].command[4]: the document expands to more than %d bytes through aliases "+
			"(4 times its file and 64 KiB); split it or drop the aliases", maxExpansion(len(wide)))},
		{"merge key", header + "spec:\n  files:\n  - &f {path: /etc/infer/a, content: a}\n  - <<: *f\n    path: /etc/infer/b\n", "merge keys (<<) are not supported"},
		{"binary tag", header + "spec:\n  files:\n  - {path: /etc/infer/a, content: !!binary aGVsbG8=}\n", "YAML tag !!binary is not supported"},
		{"long name", header + "spec:\n  files:\n  - {path: /etc/infer/" + strings.Repeat("n", 256) + ", content: a}\n", "is longer than 255 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Load("cam-017", []Input{{Name: "d.yaml", Data: []byte(tt.doc)}})
			if err == nil {
				err = d.Validate(allow)
			}
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestIsManifest(t *testing.T) {
	for name, want := range map[string]bool{
		"device.yaml": true, "sub/x.yml": true, "x.YAML": false, "notes.txt": false,
		".github/workflows/ci.yml": false, "sub/.hidden.yaml": false, "a/.old/b.yaml": false,
	} {
		require.Equal(t, want, IsManifest(name), name)
	}
}

func TestUnder(t *testing.T) {
	tests := []struct {
		p, dir string
		want   bool
	}{
		{"/etc/infer/a", "/etc/infer", true},
		{"/etc/infer/a/b", "/etc/infer", true},
		{"/etc/inferX/a", "/etc/infer", false},
		{"/etc/infer", "/etc/infer", false},
		{"/etc", "/etc/infer", false},
		{"/anything", "/", true},
		{"/", "/", false},
	}
	for _, tt := range tests {
		t.Run(tt.p+" in "+tt.dir, func(t *testing.T) {
			require.Equal(t, tt.want, Under(tt.p, tt.dir))
		})
	}
}

// A manifest file larger than MaxFileBytes is refused before it is parsed
// (or read, from a folder), naming it: a 1 GiB inline content would take
// gigabytes of memory.
func TestLargeManifestFileIsRefused(t *testing.T) {
	big := []byte("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n    - path: /etc/infer/big\n      content: \"" +
		strings.Repeat("x", MaxFileBytes) + "\"\n")
	_, err := Load("cam-017", []Input{{Name: "devices/cam-017/big.yaml", Data: big}})
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, fmt.Sprintf("devices/cam-017/big.yaml: the file is %d bytes; a manifest file may be at most %d (1 MiB)", len(big), MaxFileBytes))

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.yaml"), big, 0o644))
	_, err = ReadFiles([]string{dir})
	require.ErrorContains(t, err, filepath.Join(dir, "big.yaml")+": the file is")
}
