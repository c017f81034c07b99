package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/planner"
)

// A model version rolled back at the applied commit is quarantined by its
// digest: the next apply keeps the good version and warns why, and tend
// retry model/m@… makes it tried again.
func TestRetryQuarantinedModel(t *testing.T) {
	reg := testoci.Start(t)
	reg.PushFiles(t, "models/m:1.1.0", map[string][]byte{"model.onnx": []byte("good")})
	repo := testgit.NewRepo(t)
	n := newNode(t, repo.Dir(), "--insecure-registry", reg.Host)
	t.Cleanup(func() { stopServices(t, n.state) })
	current := filepath.Join(n.state, "models", "m", "current", "model.onnx")
	repo.WriteFile("devices/cam-017/device.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"+
		"  models:\n    - {name: m, ref: "+reg.Ref("models/m")+", policy: {semver: \">=1.0.0\"}}\n"+
		"  services:\n    - name: infer\n      command: [\"/bin/sh\", \"-c\", \"exec sleep 600\", \"${model:m}/model.onnx\"]\n      stopTimeout: 2s\n"+
		fmt.Sprintf("      health: {exec: [\"/bin/sh\", \"-c\", \"! grep -q bad %s\"], interval: 100ms, startupGrace: 1s}\n", current))
	repo.Commit("follow m by semver")
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)

	bad := reg.PushFiles(t, "models/m:1.2.0", map[string][]byte{"model.onnx": []byte("bad")})
	_, errOut, code = n.tend("apply")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "service/infer did not become healthy")

	short := planner.ShortDigest(bad)
	_, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `Warning: model/m 1\.2\.0 \(`+short+`\) was rolled back on this node at \S+Z: service/infer did not become healthy: .*; `+
		`push a new version, or run tend retry model/m@`+short+`\n`, errOut)

	_, errOut, code = n.tend("retry", "model/m@sha256:0000")
	require.Equal(t, 1, code)
	require.Equal(t, "Error: release model/m@sha256:0000 is not quarantined on this node (model/m@"+bad+" are quarantined)\n", errOut)
	out, errOut, code := n.tend("retry", "model/m@"+short)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^Retrying model/m@`+regexp.QuoteMeta(bad)+` \(rolled back at \S+Z: service/infer did not become healthy.*\)\.\n`+
		`The next tick or tend apply tries it again\.\n$`, out)
	_, errOut, code = n.tend("apply")
	require.Equal(t, 1, code, "1.2.0 is tried again")
	require.Contains(t, errOut, "service/infer did not become healthy")
	_, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "Warning: model/m 1.2.0 ("+short+") was rolled back", "quarantined again")
}
