package e2e

// Faults while pulling models, end to end: the tend binary killed with
// SIGKILL in the middle of a download, and a disk too small for a model.

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

const modelDevice = `apiVersion: tend.dev/v1alpha1
kind: Device
metadata: {name: cam-017}
spec:
  models:
    - name: detector
      ref: %s
      path: /opt/models/detector
  files:
    - path: /opt/models/README
      content: "models live here\n"
`

// faultNode is a device whose fleet repo declares one model from reg.
type faultNode struct {
	*node
	repo *testgit.Repo
	reg  *testoci.Registry
}

func newFaultNode(t *testing.T, root string) *faultNode {
	t.Helper()
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
	if root != "" {
		n.root, n.state = filepath.Join(root, "root"), filepath.Join(root, "state")
		require.NoError(t, os.MkdirAll(n.root, 0o755))
		n.flags = append(n.flags, "--root", n.root, "--state-dir", n.state)
	}
	return &faultNode{node: n, repo: repo, reg: reg}
}

func (n *faultNode) declare(repoTag string) {
	n.t.Helper()
	n.repo.WriteFile("devices/cam-017/device.yaml", fmt.Sprintf(modelDevice, n.reg.Ref(repoTag)))
	n.repo.Commit("model " + repoTag)
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// A SIGKILL in the middle of a download leaves a partial blob and no new
// version; the next run resumes the blob where it stopped (an HTTP Range
// request) and activates only verified content.
func TestModelDownloadResumesAfterKill9(t *testing.T) {
	n := newFaultNode(t, "")
	big := randomBytes(8<<20, 1)
	n.reg.PushFiles(t, "models/detector:v1", map[string][]byte{"model.onnx": big, "labels.txt": []byte("person\n")})
	n.declare("models/detector:v1")
	bigPath := "/blobs/" + testoci.Digest(big)

	// The first request for the big blob gets its first 2 MiB and then
	// nothing more, so the kill lands in the middle of it.
	var mu sync.Mutex
	var ranges []string
	requests := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), ranges...) }
	n.reg.Use(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, bigPath) {
			return false
		}
		mu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		mu.Unlock()
		if r.Header.Get("Range") != "" {
			return false // the resumed request is served whole
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(big)))
		w.WriteHeader(http.StatusOK)
		if _, err := w.Write(big[:2<<20]); err == nil {
			w.(http.Flusher).Flush()
		}
		<-r.Context().Done() // the client is killed
		return true
	})

	cmd := exec.Command(tendBin, append([]string{"apply"}, n.flags...)...)
	cmd.Env = append(os.Environ(), "TEND_CONFIG=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	partial := filepath.Join(n.state, "blobs", "partial", "sha256-"+testoci.Digest(big)[7:])
	eventually(t, func() bool {
		fi, err := os.Stat(partial)
		return err == nil && fi.Size() > 1<<20
	})
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	fi, err := os.Stat(partial)
	require.NoError(t, err)
	got := fi.Size()
	require.Less(t, got, int64(len(big)), "the download finished before the kill")
	_, err = os.Lstat(filepath.Join(n.root, "opt/models/detector"))
	require.ErrorIs(t, err, os.ErrNotExist, "a model was activated from a partial download")

	stdout, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, "%s\n%s", stdout, errOut)
	asked := requests()
	require.Len(t, asked, 2, "requests for the big blob: %q", asked)
	require.Regexp(t, `^bytes=\d+-`+fmt.Sprint(len(big)-1)+`$`, asked[1])
	var from int64
	_, err = fmt.Sscanf(asked[1], "bytes=%d-", &from)
	require.NoError(t, err)
	require.GreaterOrEqual(t, from, got, "the resume started before what the killed run had written")
	require.Equal(t, string(big), n.read("opt/models/detector/model.onnx"))
	require.Equal(t, "person\n", n.read("opt/models/detector/labels.txt"))
}

// A model that does not fit on the disk fails before any download with a
// message naming the model and the sizes; the version active before stays
// active and the rest of the plan is not applied.
func TestModelDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tend-test", dir, "tmpfs", 0, "size=4m"); err != nil {
		if errors.Is(err, syscall.EPERM) && os.Getenv("CI") == "" {
			t.Skip("mounting a tmpfs needs root (CI runs as root)")
		}
		require.NoError(t, err, "mount a 4 MB tmpfs")
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })

	n := newFaultNode(t, dir)
	n.reg.PushFiles(t, "models/detector:v1", map[string][]byte{"model.onnx": randomBytes(1<<20, 2)})
	n.declare("models/detector:v1")
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	active, err := os.Readlink(filepath.Join(n.root, "opt/models/detector"))
	require.NoError(t, err)

	n.reg.PushFiles(t, "models/detector:v2", map[string][]byte{"model.onnx": randomBytes(6<<20, 3)})
	n.repo.WriteFile("devices/cam-017/device.yaml", strings.Replace(fmt.Sprintf(modelDevice, n.reg.Ref("models/detector:v2")),
		"models live here", "models live here (v2)", 1))
	n.repo.Commit("model v2")
	before := n.snapshot()
	_, errOut, code = n.tend("apply")
	require.Equal(t, 1, code)
	require.Regexp(t, `model detector needs 6\.\d MB, [0-9.]+ [kM]B free on `+regexpQuote(n.state), errOut)
	require.Equal(t, before, n.snapshot(), "a failed pull changed the node")
	now, err := os.Readlink(filepath.Join(n.root, "opt/models/detector"))
	require.NoError(t, err)
	require.Equal(t, active, now, "the old version is no longer active")
	partials, err := os.ReadDir(filepath.Join(n.state, "blobs", "partial"))
	require.NoError(t, err)
	require.Empty(t, partials, "nothing is downloaded when the model does not fit")
}

func regexpQuote(s string) string {
	return strings.NewReplacer(".", `\.`, "+", `\+`, "(", `\(`, ")", `\)`).Replace(s)
}

// A registry that is down is not a failure while the model's ref is the
// one applied: the device is offline, keeps the version and says so. A
// commit that moves the ref while it is down applies everything that does
// not depend on the model, holds the model, and fails naming it.
func TestRegistryDownHoldsOnlyTheModel(t *testing.T) {
	n := newFaultNode(t, "")
	n.reg.PushFiles(t, "models/detector:v1", map[string][]byte{"model.onnx": []byte("one")})
	n.reg.PushFiles(t, "models/detector:v2", map[string][]byte{"model.onnx": []byte("two")})
	n.declare("models/detector:v1")
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	link := filepath.Join(n.root, "opt/models/detector")
	active, err := os.Readlink(link)
	require.NoError(t, err)

	n.reg.Use(func(w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	t.Run("the same ref offline is a warning", func(t *testing.T) {
		out, errOut, code := n.tend("apply")
		require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
		require.Contains(t, errOut, "Warning: model/detector kept at sha256:")
		require.Contains(t, out, "No changes")
	})
	t.Run("a new ref is held, the rest applied", func(t *testing.T) {
		n.repo.WriteFile("devices/cam-017/device.yaml", strings.Replace(fmt.Sprintf(modelDevice, n.reg.Ref("models/detector:v2")),
			"models live here", "models live there", 1))
		n.repo.Commit("model v2 and a new README")
		out, errOut, code := n.tend("apply")
		require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
		require.Contains(t, out, "held: registry unreachable for "+n.reg.Ref("models/detector:v2"))
		require.Contains(t, out, "Apply: 1 of 2 actions applied at HEAD@sha1:")
		require.Contains(t, out, "; held: model/detector.")
		require.Contains(t, errOut, "left out of the apply: model/detector (held: registry unreachable")
		require.Equal(t, "models live there\n", n.read("/opt/models/README"))
		now, err := os.Readlink(link)
		require.NoError(t, err)
		require.Equal(t, active, now, "the held model moved")

		out, errOut, code = n.tend("plan", "--format", "json")
		require.Equal(t, 1, code, errOut)
		require.Contains(t, out, `"held": "registry unreachable for`)
		require.NotContains(t, out, `\u003e`, "JSON escapes >")

		n.reg.Use(nil)
		out, errOut, code = n.tend("apply")
		require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
		require.Contains(t, out, "Apply complete: 1 action applied")
	})
}
