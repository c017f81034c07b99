package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// fleetDevice is a Device document: a config file with content, and when
// model is set, a model with that ref and a service that uses both.
func fleetDevice(name, content, model string) string {
	s := fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: %s}\nspec:\n", name)
	if model != "" {
		s += fmt.Sprintf("  models:\n    - name: detector\n      ref: %s\n      path: /opt/models/detector\n", model)
	}
	s += fmt.Sprintf("  files:\n    - path: /etc/infer/config.yaml\n      content: %q\n", content)
	if model != "" {
		s += "  services:\n    - name: infer\n      command: [\"/opt/infer/server\", \"${model:detector}/model.onnx\"]\n" +
			"      restartOn: [file:/etc/infer/config.yaml]\n"
	}
	return s
}

// ciFlags point tend at a fleet repo with path targeting and no agent
// config, as a CI job runs it. A --path in extra replaces the default one
// (a repeated --path adds a source path).
func ciFlags(t *testing.T, repo string, extra ...string) []string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "ci.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\n"), 0o644))
	flags := []string{"--repo", repo, "--config", cfg, "--log-format", "text"}
	if !slices.Contains(extra, "--path") {
		flags = append(flags, "--path", "devices/{device}")
	}
	return append(flags, extra...)
}

// digests hides the digests of service specs, which hold the temp folder
// diff renders in.
var digests = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

func stableDiff(s string, dirs map[string]string) string {
	return stable(digests.ReplaceAllString(s, "sha256:<digest>"), dirs)
}

// exampleFleet is a fleet repo with a few commits: at HEAD~1 (base) ten
// devices; at HEAD one device's config changes, one model moves to a new
// tag, one device goes, one comes, and one only changes a README.
func exampleFleet(t *testing.T) *testgit.Repo {
	r := testgit.NewRepo(t)
	r.WriteFile("devices/cam-001/device.yaml", fleetDevice("cam-001", "threshold: 0.4\n", "registry.local:5000/models/detector:v8"))
	r.Commit("first")
	r.WriteFile("devices/cam-002/device.yaml", fleetDevice("cam-002", "threshold: 0.4\n", "registry.local:5000/models/detector:v8"))
	r.WriteFile("devices/cam-003/device.yaml", fleetDevice("cam-003", "threshold: 0.4\n", ""))
	r.WriteFile("devices/cam-004/device.yaml", fleetDevice("cam-004", "threshold: 0.4\n", ""))
	for i := range 6 {
		name := fmt.Sprintf("cam-1%02d", i)
		r.WriteFile("devices/"+name+"/device.yaml", fleetDevice(name, "threshold: 0.4\n", ""))
	}
	r.Commit("fleet of ten")
	r.WriteFile("devices/cam-001/device.yaml", fleetDevice("cam-001", "threshold: 0.5\n", "registry.local:5000/models/detector:v8"))
	r.WriteFile("devices/cam-002/device.yaml", fleetDevice("cam-002", "threshold: 0.4\n", "registry.local:5000/models/detector:v9"))
	r.WriteFile("devices/cam-003/README.md", "cam-003 is on the roof\n")
	r.Remove("devices/cam-004")
	r.WriteFile("devices/cam-005/device.yaml", fleetDevice("cam-005", "threshold: 0.4\n", "registry.local:5000/models/detector:v9"))
	r.Commit("raise cam-001, detector v9 on cam-002, replace cam-004 by cam-005")
	return r
}

func TestDiffGolden(t *testing.T) {
	r := exampleFleet(t)
	dirs := map[string]string{r.Dir(): "<repo>"}
	for _, format := range []string{"text", "json", "markdown"} {
		t.Run(format, func(t *testing.T) {
			out, errOut, code := tend(t, append([]string{"diff", "--base", "HEAD~1", "--head", "HEAD", "--format", format}, ciFlags(t, r.Dir())...)...)
			require.Equal(t, 2, code, "changes exit 2: %s", errOut)
			require.Empty(t, errOut)
			ext := map[string]string{"text": "txt", "json": "json", "markdown": "md"}[format]
			golden.Assert(t, "diff-"+format+"."+ext+".golden", []byte(stableDiff(out, dirs)))
		})
	}
}

func TestDiffExitCodes(t *testing.T) {
	r := exampleFleet(t)
	run := func(args ...string) (string, string, int) {
		return tend(t, append([]string{"diff"}, ciFlags(t, r.Dir(), args...)...)...)
	}
	t.Run("no changes exit 0", func(t *testing.T) {
		out, errOut, code := run("--base", "main", "--head", "HEAD")
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "No changes: 10 devices, none changes.")
	})
	t.Run("a commit, a tag and a short hash are revisions", func(t *testing.T) {
		r.Tag("v1")
		out, errOut, code := run("--base", r.Git("rev-parse", "--short", "HEAD~2"), "--head", "v1")
		require.Equal(t, 2, code, errOut)
		require.Contains(t, out, "10 of 10 devices change (9 added, 0 removed, 1 changed)")
	})
	t.Run("unknown revision", func(t *testing.T) {
		_, errOut, code := run("--base", "origin/nope", "--head", "HEAD")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, `unknown revision "origin/nope"`)
	})
	t.Run("a path without {device}", func(t *testing.T) {
		_, errOut, code := run("--base", "HEAD~1", "--head", "HEAD", "--path", "devices")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "add {device} where the device's name goes")
	})
	t.Run("required flags and formats", func(t *testing.T) {
		_, errOut, code := run("--head", "HEAD")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, `"base" not set`)
		_, errOut, code = run("--base", "HEAD", "--head", "HEAD", "--format", "yaml")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "use text or json or markdown")
	})
	t.Run("a device invalid at head exits 1, names the file, and the others are reported", func(t *testing.T) {
		r.Git("checkout", "--quiet", "-b", "broken")
		r.WriteFile("devices/cam-101/device.yaml", strings.Replace(fleetDevice("cam-101", "x", ""), "/etc/infer/config.yaml", "etc/infer/config.yaml", 1))
		r.WriteFile("devices/cam-102/device.yaml", fleetDevice("cam-102", "threshold: 0.9\n", ""))
		r.Commit("break cam-101")
		defer r.Checkout("main")
		out, errOut, code := run("--base", "main", "--head", "broken", "--format", "markdown")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "devices/cam-101/device.yaml:")
		require.Contains(t, errOut, "spec.files[0].path")
		require.Contains(t, out, "| `cam-101` | **error** |")
		require.Contains(t, out, "| `cam-102` | changed | 0 | 1 | 0 | 0 |")
		require.Contains(t, out, "<details open><summary><code>cam-101</code> error")
	})
}

func TestDiffBranchPerDevice(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("README.md", "fleet\n")
	r.Commit("init")
	for _, name := range []string{"cam-1", "cam-2"} {
		r.Git("checkout", "--quiet", "-b", "devices/"+name, "main")
		r.WriteFile("device.yaml", fleetDevice(name, "v1\n", ""))
		r.Commit(name)
	}
	r.Checkout("main")
	r.WriteFile("device.yaml", fleetDevice("cam-1", "v2\n", ""))
	r.Commit("cam-1 v2 on main") // not a device branch: a candidate
	flags := ciFlags(t, r.Dir(), "--path", "", "--ref", "devices/{device}")

	out, errOut, code := tend(t, append([]string{"diff", "--base", "devices/{device}", "--head", "main"}, flags...)...)
	require.Equal(t, 1, code, "cam-2 cannot be planned: %s", errOut)
	require.Contains(t, out, "=== cam-1: changed\n")
	require.Contains(t, out, "Plan for device cam-1 at main@sha1:")
	require.Contains(t, out, "=== cam-2: error", "main declares cam-1, not cam-2")
	require.Contains(t, errOut, `this document is for device "cam-1" but it was read for device "cam-2"`)

	out, errOut, code = tend(t, append([]string{"validate", "--all"}, flags...)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "valid: device cam-1 at devices/cam-1@sha1:")
	require.Contains(t, out, "valid: device cam-2 at devices/cam-2@sha1:")

	// A device branch without manifests fails on its device: invalid.
	r.Git("checkout", "--quiet", "-b", "devices/cam-3", "main")
	r.Git("rm", "--quiet", "device.yaml")
	r.Commit("cam-3 empty")
	r.Checkout("main")
	out, _, code = tend(t, append([]string{"validate", "--all"}, flags...)...)
	require.Equal(t, 1, code)
	require.Contains(t, out, "no manifests for device cam-3")
}

func TestDiffOverHTTP(t *testing.T) {
	r := exampleFleet(t)
	srv := testgit.StartHTTP(t, filepath.Dir(r.Dir()))
	out, errOut, code := tend(t, append([]string{"diff", "--base", "HEAD~1", "--head", "main", "--format", "json"}, ciFlags(t, r.URL(srv.URL))...)...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, out, `"changed": 2,`)
	require.Contains(t, out, `"added": 1,`)
	require.Contains(t, out, `"removed": 1,`)
}

func TestDiffResolve(t *testing.T) {
	reg := testoci.Start(t)
	reg.PushFiles(t, "models/detector:v8", map[string][]byte{"model.onnx": []byte("weights v8"), "labels.txt": []byte("person\n")})
	weights := []byte(strings.Repeat("w", 2500))
	reg.PushFiles(t, "models/detector:v9", map[string][]byte{"model.onnx": weights, "labels.txt": []byte("person\n")})
	r := testgit.NewRepo(t)
	r.WriteFile("devices/cam-1/device.yaml", fleetDevice("cam-1", "x", reg.Ref("models/detector:v8")))
	r.WriteFile("devices/cam-2/device.yaml", fleetDevice("cam-2", "x", reg.Ref("models/detector:v8")))
	r.Commit("v8")
	r.WriteFile("devices/cam-1/device.yaml", fleetDevice("cam-1", "x", reg.Ref("models/detector:v9")))
	r.Commit("v9 on cam-1")
	r.WriteFile("devices/cam-2/device.yaml", fleetDevice("cam-2", "x", reg.Ref("models/detector:v10")))
	r.Commit("a typo on cam-2")
	flags := ciFlags(t, r.Dir(), "--insecure-registry", reg.Host, "--resolve")

	out, errOut, code := tend(t, append([]string{"diff", "--base", "HEAD~2", "--head", "HEAD~1", "--format", "markdown"}, flags...)...)
	require.Equal(t, 2, code, errOut)
	require.Contains(t, out, "| device | status | add | change | delete | restarts | download |")
	// A device at base holds labels.txt already: only the new weights are
	// downloaded, and the change is worded as a device's plan words it.
	size := printable.HumanBytes(int64(len(weights)))
	require.Contains(t, out, "| `cam-1` | changed | 0 | 2 | 0 | 1 | "+size+" |")
	require.Regexp(t, `update: sha256:[0-9a-f]{12} → sha256:[0-9a-f]{12} \(ref `+regexp.QuoteMeta(reg.Ref("models/detector:v9"))+`\), `+regexp.QuoteMeta(size)+` to download`, out)

	out, errOut, code = tend(t, append([]string{"diff", "--base", "HEAD~2", "--head", "HEAD"}, flags...)...)
	require.Equal(t, 1, code, "a missing tag is an error")
	require.Contains(t, out, "=== cam-1: changed", "the other devices are still reported")
	for _, want := range []string{"device cam-2", "devices/cam-2/device.yaml", "tag v10 not found in " + reg.Ref("models/detector") + "; close tags: v9, v8 (2 tags)"} {
		require.Contains(t, errOut, want)
	}

	out, errOut, code = tend(t, append([]string{"validate", "--all"}, flags...)...)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "valid: device cam-1")
	require.Contains(t, out, "invalid: device cam-2")
	require.Regexp(t, `devices/cam-2/device\.yaml:\d+: spec\.models\[0\]\.ref: model detector: tag v10 not found in `+regexp.QuoteMeta(reg.Ref("models/detector")), out)
	require.Contains(t, errOut, "1 of 2 devices invalid: cam-2")

	// An include that matches no file of the artifact is invalid.
	r.WriteFile("devices/cam-2/device.yaml", strings.Replace(fleetDevice("cam-2", "x", reg.Ref("models/detector:v9")),
		"      path: /opt/models/detector\n", "      path: /opt/models/detector\n      include: [\"*.onnx\", \"*.gguf\"]\n", 1))
	r.Commit("an include on cam-2")
	out, errOut, code = tend(t, append([]string{"validate", "--all"}, flags...)...)
	require.Equal(t, 1, code, out)
	require.Regexp(t, `devices/cam-2/device\.yaml:\d+: spec\.models\[0\]\.include: model detector: include "\*\.gguf" matches no file of the model sha256:[0-9a-f]{64}; it holds labels\.txt, model\.onnx`, out)
	require.Contains(t, errOut, "1 of 2 devices invalid: cam-2")
}

func TestValidateAll(t *testing.T) {
	r := exampleFleet(t)
	r.WriteFile("devices/cam-101/device.yaml", strings.Replace(fleetDevice("cam-101", "x", ""), "/etc/infer/config.yaml", "etc/infer/config.yaml", 1))
	r.WriteFile("devices/cam-102/device.yaml", fleetDevice("cam-102", "x", "registry.local:5000/models/detector")) // no tag
	r.Commit("two broken devices")

	out, errOut, code := tend(t, append([]string{"validate", "--all"}, ciFlags(t, r.Dir())...)...)
	require.Equal(t, 1, code)
	require.Contains(t, out, "valid: device cam-001 at HEAD@sha1:")
	require.Regexp(t, `invalid: device cam-101 at HEAD@sha1:[0-9a-f]{40}:\n  devices/cam-101/device\.yaml:\d+: spec\.files\[0\]\.path: "etc/infer/config\.yaml" is relative`, out)
	require.Regexp(t, `invalid: device cam-102 at HEAD@sha1:[0-9a-f]{40}:\n  devices/cam-102/device\.yaml:\d+: spec\.models\[0\]\.ref: .* has no tag or digest`, out)
	require.Contains(t, errOut, "2 of 10 devices invalid: cam-101, cam-102")

	_, errOut, code = tend(t, append([]string{"validate", "--all", "--rev", "HEAD~1"}, ciFlags(t, r.Dir())...)...)
	require.Equal(t, 0, code, errOut)

	_, errOut, code = tend(t, append([]string{"validate", "--all", "some/file.yaml"}, ciFlags(t, r.Dir())...)...)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "give no files with it")
}

// A fleet with devices in folders of main and devices on branches of their
// own is checked whole by one validate --all with both patterns.
func TestValidateAllFoldersAndBranches(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("devices/cam-1/device.yaml", fleetDevice("cam-1", "v1\n", ""))
	r.WriteFile("devices/cam-2/device.yaml", fleetDevice("cam-2", "v1\n", ""))
	r.Commit("two folder devices")
	r.Git("checkout", "--quiet", "-b", "devices/cam-3", "main")
	r.WriteFile("devices/cam-3/device.yaml", fleetDevice("cam-3", "v1\n", ""))
	r.Commit("cam-3 on its branch")
	r.Checkout("main")
	r.WriteFile("devices/cam-2/device.yaml", strings.Replace(fleetDevice("cam-2", "v1\n", ""), "/etc/infer/config.yaml", "etc/infer/config.yaml", 1))
	r.Commit("break cam-2")
	flags := append(ciFlags(t, r.Dir()), "--ref", "devices/{device}")

	out, errOut, code := tend(t, append([]string{"validate", "--all"}, flags...)...)
	require.Equal(t, 1, code, errOut)
	require.Regexp(t, `^valid: device cam-1 at HEAD@sha1:[0-9a-f]{40}: 0 models, 1 file, 0 services\n`+
		`valid: device cam-3 at devices/cam-3@sha1:[0-9a-f]{40}: 0 models, 1 file, 0 services\n`+
		`invalid: device cam-2 at HEAD@sha1:[0-9a-f]{40}:\n  devices/cam-2/device\.yaml:\d+: spec\.files\[0\]\.path: "etc/infer/config\.yaml" is relative.*\n`+
		`\(allowPaths not checked: .*\)\n$`, out)
	require.Contains(t, errOut, "1 of 3 devices invalid: cam-2")
}
