package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// tend apply --stage-only downloads the target's model into the store and
// activates nothing: the link keeps the applied version and the plan still
// shows the update; the apply after it downloads nothing (counted at the
// registry).
func TestApplyStageOnly(t *testing.T) {
	reg := testoci.Start(t)
	v8, v9 := bytes.Repeat([]byte("8"), 1<<20), bytes.Repeat([]byte("9"), 1<<20)
	reg.PushFiles(t, "models/detector:v8", map[string][]byte{"model.onnx": v8})
	digest9 := reg.PushFiles(t, "models/detector:v9", map[string][]byte{"model.onnx": v9})
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", distDevice(reg.Ref("models/detector:v8")))
	repo.Commit("v8")
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	link := filepath.Join(n.root, "opt/models/detector")
	active, err := os.Readlink(link)
	require.NoError(t, err)

	repo.WriteFile("devices/cam-017/device.yaml", distDevice(reg.Ref("models/detector:v9")))
	repo.Commit("v9")
	served := reg.BlobBytes.Load()
	out, errOut, code := n.tend("apply", "--stage-only")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Staged model/detector: "+reg.Ref("models/detector:v9")+" → "+digest9[:len("sha256:")+12]+" (1.0 MB downloaded).\n")
	require.Regexp(t, `Stage complete: 1 model staged \(1\.0 MB downloaded\) at HEAD@sha1:[0-9a-f]{40}; nothing activated\.\n$`, out)
	require.Equal(t, int64(len(v9)), reg.BlobBytes.Load()-served, "the new version's blob")
	now, err := os.Readlink(link)
	require.NoError(t, err)
	require.Equal(t, active, now, "nothing activated")
	plan, errOut, code := n.tend("plan", "--detailed-exitcode")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, plan, "~ model/detector")
	require.Contains(t, plan, "nothing to download", "the plan knows the blobs are in the store")

	served = reg.BlobBytes.Load()
	_, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, served, reg.BlobBytes.Load(), "the apply after --stage-only downloads nothing")
	now, err = os.Readlink(link)
	require.NoError(t, err)
	require.NotEqual(t, active, now)
	b, err := os.ReadFile(filepath.Join(link, "model.onnx"))
	require.NoError(t, err)
	require.True(t, bytes.Equal(v9, b))

	out, errOut, code = n.tend("apply", "--stage-only")
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.HasPrefix(out, "Stage complete: nothing to download at HEAD@sha1:"), out)

	_, errOut, code = n.tend("apply", "--stage-only", "--format", "json")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--stage-only prints text; --format json is not supported with it")
}

// tend apply --stage-only draws its downloads on a terminal, as apply does.
func TestStageOnlyShowsPullProgressOnATerminal(t *testing.T) {
	reg := testoci.Start(t)
	weights := bytes.Repeat([]byte("w"), 2<<20)
	reg.PushFiles(t, "models/detector:v8", map[string][]byte{"model.onnx": weights})
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", distDevice(reg.Ref("models/detector:v8")))
	repo.Commit("v8")
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
	out, screen, code := tendOnTerminal(t, append([]string{"apply", "--stage-only"}, n.flags...)...)
	require.Equal(t, 0, code, screen)
	require.Regexp(t, `\rpulling model/detector  2\.1 MB / 2\.1 MB \(100%\)`, screen)
	require.Contains(t, out, "Stage complete: 1 model staged (2.1 MB downloaded)")
	require.NoFileExists(t, filepath.Join(n.root, "opt/models/detector"), "nothing activated")
}
