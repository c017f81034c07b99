package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// validate --all --resolve warns, under the device and at the file:line
// of the policy, when a semver policy resolves to a tag that is no full
// MAJOR.MINOR.PATCH version (v3, read as 3.0.0), and says nothing of one
// that resolves to 1.2.3 or v1.2.3. A warning is no failure.
func TestValidateResolveWarnsOfPartialTags(t *testing.T) {
	reg := testoci.Start(t)
	for _, tag := range []string{"v1", "v2", "v3"} {
		reg.PushFiles(t, "models/detector:"+tag, map[string][]byte{"model.onnx": []byte("weights " + tag)})
	}
	for _, tag := range []string{"1.2.2", "1.2.3"} {
		reg.PushFiles(t, "models/classifier:"+tag, map[string][]byte{"model.onnx": []byte("weights " + tag)})
	}
	reg.PushFiles(t, "models/tracker:v1.2.3", map[string][]byte{"model.onnx": []byte("weights")})
	device := func(name string, models ...[2]string) string {
		s := fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: %s}\nspec:\n  models:\n", name)
		for _, m := range models {
			s += fmt.Sprintf("    - name: %s\n      ref: %s\n      policy: {semver: %q}\n", m[0], reg.Ref("models/"+m[0]), m[1])
		}
		return s
	}
	r := testgit.NewRepo(t)
	r.WriteFile("devices/cam-1/device.yaml", device("cam-1", [2]string{"classifier", ">=1.0.0"}, [2]string{"detector", ">=1.0.0"}))
	r.WriteFile("devices/cam-2/device.yaml", device("cam-2", [2]string{"classifier", "~1.2"}, [2]string{"tracker", ">=1.0.0"}))
	r.Commit("fleet")

	out, errOut, code := tend(t, "validate", "--all", "--resolve", "--repo", r.Dir(), "--path", "devices/{device}",
		"--insecure-registry", reg.Host, "--log-format", "text")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	golden.Assert(t, "validate-resolve-partial-tag.golden", withStderr(stable(out, map[string]string{reg.Host: "<registry>"}), errOut))
}
