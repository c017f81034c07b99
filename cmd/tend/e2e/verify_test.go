package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testcosign"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// validate --all --resolve and diff --resolve check models.verify of the
// config in the registry, as devices do: a device pointed at a model no
// listed key signed fails in CI, naming the model, its digest and what
// was found.
func TestResolveChecksSignatures(t *testing.T) {
	cosign := testcosign.New(t)
	priv, pub := cosign.KeyPair("release")
	reg := testoci.Start(t)
	signed := reg.PushFiles(t, "models/detector:v8", map[string][]byte{"model.onnx": []byte("weights v8")})
	cosign.Sign(priv, reg.Ref("models/detector@"+signed))
	unsigned := reg.PushFiles(t, "models/detector:v9", map[string][]byte{"model.onnx": []byte("weights v9")})

	r := testgit.NewRepo(t)
	r.WriteFile("devices/cam-1/device.yaml", fleetDevice("cam-1", "x", reg.Ref("models/detector:v8")))
	r.WriteFile("devices/cam-2/device.yaml", fleetDevice("cam-2", "x", reg.Ref("models/detector:v8")))
	r.Commit("v8")
	r.WriteFile("devices/cam-2/device.yaml", fleetDevice("cam-2", "x", reg.Ref("models/detector:v9")))
	r.Commit("v9 on cam-2")
	cfg := filepath.Join(t.TempDir(), "ci.yaml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil, "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nmodels: {verify: {cosign: {keys: [%s]}}}\n", pub), 0o644))
	flags := []string{"--repo", r.Dir(), "--config", cfg, "--log-format", "text", "--path", "devices/{device}", "--insecure-registry", reg.Host, "--resolve"}
	want := "model/detector " + reg.Ref("models/detector") + "@" + unsigned + ": no cosign signature by " + pub + " (found no cosign signature of this digest)"

	out, errOut, code := tend(t, append([]string{"validate", "--all", "--rev", "HEAD~1"}, flags...)...)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	out, errOut, code = tend(t, append([]string{"validate", "--all"}, flags...)...)
	require.Equal(t, 1, code, "%s\n%s", out, errOut)
	require.Contains(t, out, "valid: device cam-1")
	require.Contains(t, out, want)
	require.Contains(t, errOut, "1 of 2 devices invalid: cam-2")

	out, errOut, code = tend(t, append([]string{"diff", "--base", "HEAD~1", "--head", "HEAD"}, flags...)...)
	require.Equal(t, 1, code, "%s\n%s", out, errOut)
	require.Contains(t, errOut, want)
}

// validate --all --resolve and diff --resolve check runtime.verify of the
// config, and what a service's own verify adds, against the image of
// every container service: an unsigned image fails in CI, naming the
// service, the image, its digest and the key it lacks.
func TestResolveChecksImageSignatures(t *testing.T) {
	cosign := testcosign.New(t)
	priv, pub := cosign.KeyPair("release")
	_, otherPub := cosign.KeyPair("other")
	reg := testoci.Start(t)
	signed := reg.PushFiles(t, "app:v1", map[string][]byte{"bin": []byte("app one")})
	cosign.Sign(priv, reg.Ref("app@"+signed))
	unsigned := reg.PushFiles(t, "app:v2", map[string][]byte{"bin": []byte("app two")})
	device := func(name, tag, own string) string {
		return fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: %s}\nspec:\n  services:\n    - name: web\n      image: %s\n%s",
			name, reg.Ref("app:"+tag), own)
	}

	r := testgit.NewRepo(t)
	r.WriteFile("devices/cam-1/device.yaml", device("cam-1", "v1", ""))
	r.WriteFile("devices/cam-2/device.yaml", device("cam-2", "v1", ""))
	r.Commit("v1")
	r.WriteFile("devices/cam-2/device.yaml", device("cam-2", "v2", ""))
	r.Commit("v2 on cam-2")
	r.WriteFile("devices/cam-2/device.yaml", device("cam-2", "v1", "      verify: {cosign: {keys: ["+otherPub+"]}}\n"))
	r.Commit("v1 on cam-2, signed by another key too")
	cfg := filepath.Join(t.TempDir(), "ci.yaml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil, "apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nruntime: {verify: {cosign: {keys: [%s]}}}\n", pub), 0o644))
	flags := []string{"--repo", r.Dir(), "--config", cfg, "--log-format", "text", "--path", "devices/{device}", "--insecure-registry", reg.Host, "--resolve"}
	unsignedErr := "service/web " + reg.Ref("app") + "@" + unsigned + ": no cosign signature by " + pub + " (found no cosign signature of this digest)"
	otherErr := "service/web " + reg.Ref("app") + "@" + signed + ": no cosign signature by " + otherPub + " (found 1 signature by another key)"

	out, errOut, code := tend(t, append([]string{"validate", "--all", "--rev", "HEAD~2"}, flags...)...)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	out, errOut, code = tend(t, append([]string{"validate", "--all", "--rev", "HEAD~1"}, flags...)...)
	require.Equal(t, 1, code, "%s\n%s", out, errOut)
	require.Contains(t, out, "valid: device cam-1")
	require.Regexp(t, `devices/cam-2/device\.yaml:\d+: spec\.services\[0\]\.image: service web: image `+regexp.QuoteMeta(reg.Ref("app:v2")+": "+unsignedErr), out)
	require.Contains(t, errOut, "1 of 2 devices invalid: cam-2")
	out, errOut, code = tend(t, append([]string{"validate", "--all"}, flags...)...)
	require.Equal(t, 1, code, "%s\n%s", out, errOut)
	require.Contains(t, out, otherErr)

	out, errOut, code = tend(t, append([]string{"diff", "--base", "HEAD~2", "--head", "HEAD~1"}, flags...)...)
	require.Equal(t, 1, code, "%s\n%s", out, errOut)
	require.Contains(t, errOut, unsignedErr)
	out, errOut, code = tend(t, append([]string{"diff", "--base", "HEAD~2", "--head", "HEAD"}, flags...)...)
	require.Equal(t, 1, code, "%s\n%s", out, errOut)
	require.Contains(t, errOut, otherErr)
}
