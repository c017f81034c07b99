package e2e

// The crash suite: tend killed (SIGKILL, as kill -9 or a power cut ends
// it) at every durable step of an apply, by a binary built with the
// failpoints tag. After each kill the node holds, for every resource, its
// old or its new state, never a mix; the next apply converges, performs
// every restart it owes, leaves no temporary file and prunes nothing tend
// did not create.

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/planner"
)

var (
	crashBinOnce sync.Once
	crashBin     string
	crashBinErr  error
)

// crashTend builds tend with its failpoints once.
func crashTend(t *testing.T) string {
	t.Helper()
	crashBinOnce.Do(func() {
		crashBin = filepath.Join(filepath.Dir(tendBin), "tend-failpoints")
		out, err := exec.Command("go", "build", "-tags", "failpoints", "-o", crashBin, tendPkg).CombinedOutput()
		if err != nil {
			crashBinErr = fmt.Errorf("build tend with failpoints: %v\n%s", err, out)
		}
	})
	require.NoError(t, crashBinErr)
	return crashBin
}

// crashFleet is a fleet repo and a registry for one device whose service
// depends on a model and a file; rev2 changes the model and the file, not
// the service's own spec, so the service's restart is owed to them alone.
type crashFleet struct {
	repo       *testgit.Repo
	reg        *testoci.Registry
	seen       string // folder where each service process writes what it read at start
	nonce      string // in the service's command line, to find its processes
	rev1, rev2 string
	rev3       string // rev2 with a new config and a service that never becomes healthy
}

const crashDevice = `apiVersion: tend.dev/v1alpha1
kind: Device
metadata: {name: cam-017}
spec:
  models:
    - name: detector
      ref: %[1]s
      path: /opt/models/detector
  files:
    - path: /etc/infer/config.yaml
      content: "config %[2]s\n"
%[3]s  services:
    - name: infer
      command: ["/bin/sh", "-c", "cat ${model:detector}/labels.txt ${file:/etc/infer/config.yaml} > %[4]s/$$; exec sleep 600 %[5]s"]
      stopTimeout: 2s
%[6]s`

func newCrashFleet(t *testing.T) *crashFleet {
	t.Helper()
	f := &crashFleet{repo: testgit.NewRepo(t), reg: testoci.Start(t), seen: t.TempDir(), nonce: fmt.Sprintf("0.%d", os.Getpid())}
	f.reg.PushFiles(t, "models/detector:v1", map[string][]byte{"labels.txt": []byte("labels v1\n"), "model.onnx": []byte("weights v1")})
	f.reg.PushFiles(t, "models/detector:v2", map[string][]byte{"labels.txt": []byte("labels v2\n"), "model.onnx": []byte("weights v2")})
	write := func(tag, config, extra, health string) string {
		f.repo.WriteFile("devices/cam-017/device.yaml", fmt.Sprintf(crashDevice, f.reg.Ref("models/detector:"+tag), config, extra, f.seen, f.nonce, health))
		return f.repo.Commit(tag + " config " + config)
	}
	f.rev1 = write("v1", "1", "    - path: /etc/infer/extra.yaml\n      content: \"extra\\n\"\n", "")
	newFile := "    - path: /etc/infer/new.yaml\n      content: \"new\\n\"\n"
	f.rev2 = write("v2", "2", newFile, "")
	f.rev3 = write("v2", "3", newFile, "      health: {exec: [/bin/false], startupGrace: 1s}\n")
	return f
}

// node returns a device at rev1 and a foreign file tend must never delete.
func (f *crashFleet) node(t *testing.T) *node {
	t.Helper()
	n := newNode(t, f.repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", f.reg.Host)
	t.Cleanup(func() { stopServices(t, n.state) })
	_, errOut, code := n.tend("apply", "--ref", f.rev1)
	require.Equal(t, 0, code, errOut)
	n.write("etc/infer/foreign.txt", "not tend's\n")
	return n
}

// crash runs apply at rev (the source's own, for "") with the failpoints
// binary killing itself at point, and requires that it did.
func (n *node) crash(rev, point string) {
	n.t.Helper()
	var extra []string
	if rev != "" {
		extra = []string{"--ref", rev}
	}
	n.crashApply(point, extra...)
}

// crashApply runs apply with extra flags with the failpoints binary
// killing itself at point, and requires that it did.
func (n *node) crashApply(point string, extra ...string) {
	n.t.Helper()
	args := append(append([]string{"apply"}, n.flags...), extra...)
	cmd := exec.Command(crashTend(n.t), args...)
	cmd.Env = append(os.Environ(), "TEND_CONFIG=", "TEND_FAILPOINT="+point)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	require.True(n.t, errors.As(err, &ee), "apply ran to its end: failpoint %s not reached\n%s", point, out.String())
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(n.t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "apply did not die at %s: %v\n%s", point, err, out.String())
}

// oneOf requires the file at p (under root) to hold one of the contents,
// "" meaning absent.
func (n *node) oneOf(p string, contents ...string) {
	n.t.Helper()
	b, err := os.ReadFile(filepath.Join(n.root, p))
	got := string(b)
	if errors.Is(err, fs.ErrNotExist) {
		got = ""
	} else {
		require.NoError(n.t, err)
	}
	require.Contains(n.t, contents, got, "%s is torn or unknown", p)
}

// temps lists the temporary files tend left anywhere under root or state.
func (n *node) temps() []string {
	n.t.Helper()
	var out []string
	for _, dir := range []string{n.root, n.state} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), atomicfile.TempPrefix) {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// instances returns the pids of the processes of the crash fleet's
// service that run: found by the nonce in their command line.
func (f *crashFleet) instances(t *testing.T) []int {
	t.Helper()
	var pids []int
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmd, []byte(f.nonce)) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && bytes.Contains(st, []byte(") Z ")) {
			continue // a zombie: gone
		}
		pids = append(pids, pid)
	}
	return pids
}

// converged requires the node to be at rev2 in full, with one instance of
// the service, started on rev2's model and file.
func (f *crashFleet) converged(t *testing.T, n *node) {
	t.Helper()
	_, errOut, code := n.tend("apply", "--ref", f.rev2)
	require.Equal(t, 0, code, "the apply after the crash did not converge:\n%s", errOut)
	require.Equal(t, "config 2\n", n.read("etc/infer/config.yaml"))
	require.Equal(t, "new\n", n.read("etc/infer/new.yaml"))
	n.oneOf("etc/infer/extra.yaml", "")
	require.Equal(t, "labels v2\n", n.read("opt/models/detector/labels.txt"))
	require.Equal(t, "not tend's\n", n.read("etc/infer/foreign.txt"), "tend pruned what it did not create")
	pids := f.instances(t)
	require.Len(t, pids, 1, "instances of the service: %v", pids)
	require.Equal(t, pids[0], servicePID(t, n.state, "infer"), "the running instance is not the recorded one")
	seen, err := os.ReadFile(filepath.Join(f.seen, fmt.Sprint(pids[0])))
	require.NoError(t, err)
	require.Equal(t, "labels v2\nconfig 2\n", string(seen), "the service runs on what it started with: a restart was owed")
	require.Empty(t, n.temps(), "temporary files left")
	_, errOut, code = n.tend("plan", "--ref", f.rev2, "--detailed-exitcode")
	require.Equal(t, 0, code, "converged, yet the plan has changes:\n%s", errOut)
}

// TestCrashAtEveryDurableStep kills apply at each durable step of the move
// from rev1 to rev2: the plan updates the model, updates a file, creates
// one, restarts the service (owed to the model and the file) and deletes
// a file.
func TestCrashAtEveryDurableStep(t *testing.T) {
	f := newCrashFleet(t)
	points := []string{
		"atomic:temp#1", "atomic:renamed#1", "atomic:temp#4", "atomic:renamed#6", "atomic:temp-link",
		"model:record", "model:swapped",
		"apply:done#1", "apply:done#2", "apply:done#3", "apply:done#4",
		"service:stopped", "service:starting", "service:started", "service:recorded",
		"inventory:save#1", "inventory:save#2",
	}
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			n := f.node(t)
			n.crash(f.rev2, point)
			// Old or new, per resource, never a mix.
			n.oneOf("etc/infer/config.yaml", "config 1\n", "config 2\n")
			n.oneOf("etc/infer/new.yaml", "", "new\n")
			n.oneOf("etc/infer/extra.yaml", "extra\n", "")
			n.oneOf("opt/models/detector/labels.txt", "labels v1\n", "labels v2\n")
			n.oneOf("opt/models/detector/model.onnx", "weights v1", "weights v2")
			f.converged(t, n)
		})
	}
}

// TestCrashDuringRollback kills apply while it rolls back rev3 (whose
// service never becomes healthy) to rev2. The quarantine is written before
// the rollback begins: killed once it is written, or during the rollback,
// the node never applies rev3 again and goes back to rev2 in full.
func TestCrashDuringRollback(t *testing.T) {
	f := newCrashFleet(t)
	for _, point := range []string{"quarantine:written", "rollback:step#1", "rollback:step#2"} {
		t.Run(point, func(t *testing.T) {
			n := f.node(t)
			_, errOut, code := n.tend("apply", "--ref", f.rev2)
			require.Equal(t, 0, code, errOut)
			n.crash(f.rev3, point)
			n.oneOf("etc/infer/config.yaml", "config 2\n", "config 3\n")
			refused := "commit " + f.rev3[:12] + " was rolled back on this node: "
			_, errOut, code = n.tend("apply", "--ref", f.rev3)
			require.Equal(t, 1, code, errOut)
			require.Contains(t, errOut, refused, "the quarantine written before the rollback was lost")
			require.NotContains(t, errOut, `msg="rolling back"`, "rev3 was tried again")
			f.converged(t, n)
		})
	}
}

// TestCrashDuringModelRollback kills apply after a model's tag moved to a
// version that makes its service unhealthy, at the same commit: once the
// digest is quarantined (before the rollback begins) and at each step of
// the rollback. The next apply keeps the good version (the tag still
// names the bad one), the service runs on it, and the bad digest stays
// quarantined.
func TestCrashDuringModelRollback(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	for _, point := range []string{"quarantine:written", "rollback:step#1", "rollback:step#2"} {
		t.Run(point, func(t *testing.T) {
			tag := "models/m:" + strings.NewReplacer(":", "-", "#", "-").Replace(point)
			n := followModel(t, reg, repo, tag)

			bad := reg.PushFiles(t, tag, map[string][]byte{"model.onnx": []byte("bad")})
			n.crash("", point)
			n.oneOf("opt/models/m/model.onnx", "good", "bad")
			q, err := applier.LoadQuarantine(n.state)
			require.NoError(t, err)
			require.Contains(t, q, applier.ReleaseKey("model/m", bad), "the quarantine written before the rollback was lost")

			plan := keptGood(t, n)
			require.Contains(t, plan, "model/m "+strings.TrimPrefix(tag, "models/m:")+" ("+planner.ShortDigest(bad)+") was rolled back on this node")
		})
	}
}

// followModel returns a node that applied a device following model tag
// (pushed with good weights), whose service is healthy while the weights
// are not "bad".
func followModel(t *testing.T, reg *testoci.Registry, repo *testgit.Repo, tag string) *node {
	t.Helper()
	reg.PushFiles(t, tag, map[string][]byte{"model.onnx": []byte("good")})
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
	t.Cleanup(func() { stopServices(t, n.state) })
	weights := filepath.Join(n.root, "opt/models/m/model.onnx")
	repo.WriteFile("devices/cam-017/device.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"+
		"  models:\n    - {name: m, ref: "+reg.Ref(tag)+", path: /opt/models/m}\n"+
		"  services:\n    - name: infer\n      command: [\"/bin/sh\", \"-c\", \"exec sleep 600\", \"${model:m}\"]\n      stopTimeout: 2s\n"+
		"      health: {exec: [\"/bin/sh\", \"-c\", \"! grep -q bad "+weights+"\"], interval: 100ms, startupGrace: 1s}\n")
	repo.Commit("follow " + tag)
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	return n
}

// keptGood requires the next apply of a node from followModel to keep
// the good weights without trying the bad ones again, and the node to be
// converged; it returns what the plan printed.
func keptGood(t *testing.T, n *node) string {
	t.Helper()
	_, errOut, code := n.tend("apply")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, errOut, `msg="rolling back"`, "the bad version was tried again")
	require.Equal(t, "good", n.read("opt/models/m/model.onnx"))
	out, errOut, code := n.tend("plan", "--detailed-exitcode")
	require.Equal(t, 0, code, "converged, yet the plan has changes:\n%s\n%s", out, errOut)
	return out + errOut
}

// TestCrashDuringStaging kills tend while it stages a model of two blobs
// (once the first is stored), and while it activates a staged one: the
// blobs staged are not downloaded again, and the node holds the old
// version or the new, never a mix.
func TestCrashDuringStaging(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	for _, point := range []string{"blob:stored#1", "model:swapped"} {
		t.Run(point, func(t *testing.T) {
			tag := "models/m:" + strings.NewReplacer(":", "-", "#", "-").Replace(point)
			reg.PushFiles(t, tag+"-1", map[string][]byte{"a.bin": []byte("old a"), "b.bin": []byte("old b")})
			a, b := bytes.Repeat([]byte("a"), 512<<10), bytes.Repeat([]byte("b"), 512<<10)
			reg.PushFiles(t, tag+"-2", map[string][]byte{"a.bin": a, "b.bin": b})
			n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
			declare := func(v string) {
				repo.WriteFile("devices/cam-017/device.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"+
					"  models:\n    - {name: m, ref: "+reg.Ref(tag+"-"+v)+", path: /opt/models/m}\n")
				repo.Commit(tag + " " + v)
			}
			declare("1")
			_, errOut, code := n.tend("apply")
			require.Equal(t, 0, code, errOut)
			declare("2")
			if point == "blob:stored#1" {
				n.crashApply(point, "--stage-only")
			} else {
				_, errOut, code = n.tend("apply", "--stage-only")
				require.Equal(t, 0, code, errOut)
				before := reg.BlobBytes.Load()
				n.crash("", point)
				require.Equal(t, before, reg.BlobBytes.Load(), "the activation of a staged model downloaded")
			}
			n.oneOf("opt/models/m/a.bin", "old a", string(a))
			n.oneOf("opt/models/m/b.bin", "old b", string(b))
			if got := n.read("opt/models/m/a.bin"); got != "old a" {
				require.Equal(t, string(b), n.read("opt/models/m/b.bin"), "a mix of versions")
			}

			before := reg.BlobBytes.Load()
			_, errOut, code = n.tend("apply")
			require.Equal(t, 0, code, "the apply after the crash did not converge:\n%s", errOut)
			require.Equal(t, string(a), n.read("opt/models/m/a.bin"))
			require.Equal(t, string(b), n.read("opt/models/m/b.bin"))
			got := reg.BlobBytes.Load() - before
			if point == "blob:stored#1" {
				require.LessOrEqual(t, got, int64(len(b))+4096, "the blob stored before the crash was downloaded again")
			} else {
				require.Zero(t, got, "staged blobs were downloaded again")
			}
			require.Empty(t, n.temps(), "temporary files left")
		})
	}
}

// A tick killed before its last inventory save (as one whose save hits a
// full disk is) has recorded what it was about to create first: a file it
// created and the next commit no longer declares is pruned, not taken for
// one found on the node.
func TestCreatedBeforeTheLastSaveIsTends(t *testing.T) {
	f := newCrashFleet(t)
	n := f.node(t)
	n.crash(f.rev2, "inventory:save#2")
	require.Equal(t, "new\n", n.read("etc/infer/new.yaml"))
	out, errOut, code := n.tend("apply", "--ref", f.rev1)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "- file/etc/infer/new.yaml")
	n.oneOf("etc/infer/new.yaml", "")
	require.Equal(t, "not tend's\n", n.read("etc/infer/foreign.txt"))
	require.Equal(t, "extra\n", n.read("etc/infer/extra.yaml"))
}

// TestCrashDuringOCISourceUnpack kills apply while the fleet artifact of
// rev2 is unpacked (before its folder is renamed into place) and once it
// is kept (before anything of it is applied): the node holds rev1 or
// rev2 per resource, and the next apply takes rev2 in full from a kept
// artifact that is whole.
func TestCrashDuringOCISourceUnpack(t *testing.T) {
	f := newCrashFleet(t)
	for i, point := range []string{"ocisource:unpacked", "ocisource:kept"} {
		t.Run(point, func(t *testing.T) {
			url := fmt.Sprintf("oci://%s/fleet%d:main", f.reg.Host, i)
			publish := func(rev string) {
				_, errOut, code := tend(t, "publish", "--repo", f.repo.Dir(), "--rev", rev, url, "--insecure-registry", f.reg.Host)
				require.Equal(t, 0, code, errOut)
			}
			publish(f.rev1)
			n := newNode(t, url, "--allow-path", "/opt/models", "--insecure-registry", f.reg.Host)
			t.Cleanup(func() { stopServices(t, n.state) })
			_, errOut, code := n.tend("apply")
			require.Equal(t, 0, code, errOut)
			publish(f.rev2)
			n.crash("", point)
			n.oneOf("etc/infer/config.yaml", "config 1\n")
			_, errOut, code = n.tend("apply")
			require.Equal(t, 0, code, "the apply after the crash did not converge:\n%s", errOut)
			require.Equal(t, "config 2\n", n.read("etc/infer/config.yaml"))
			require.Equal(t, "new\n", n.read("etc/infer/new.yaml"))
			require.Equal(t, "labels v2\n", n.read("opt/models/detector/labels.txt"))
			require.Empty(t, n.temps(), "temporary files left")
			_, errOut, code = n.tend("plan", "--detailed-exitcode")
			require.Equal(t, 0, code, "converged, yet the plan has changes:\n%s", errOut)
		})
	}
}

// TestCrashWhileUnpackingATarLayer kills tend once a ModelKit's tar layer
// is unpacked into a tree not yet in place, and once the tree is in place
// before its blob is removed: the node holds the old version, the next
// apply converges without downloading the layer again, and the layer is
// left on disk once, as its tree.
func TestCrashWhileUnpackingATarLayer(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	const kit = "application/vnd.kitops.modelkit."
	config := []byte(`{"manifestVersion":"1.0.0","package":{"name":"llm"},"model":{"name":"llm","path":"model.gguf"}}`)
	for _, point := range []string{"tree:built", "tree:stored"} {
		t.Run(point, func(t *testing.T) {
			tag := "models/llm:" + strings.ReplaceAll(point, ":", "-")
			layer := func(body string) []byte {
				var b bytes.Buffer
				tw := tar.NewWriter(&b)
				require.NoError(t, tw.WriteHeader(&tar.Header{Name: "model.gguf", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}))
				_, err := tw.Write([]byte(body))
				require.NoError(t, err)
				require.NoError(t, tw.Close())
				return b.Bytes()
			}
			old, next := layer("old weights"), layer("new weights")
			for v, data := range map[string][]byte{"1": old, "2": next} {
				_, err := testoci.PushArtifact(reg.Host, tag+"-"+v, "", kit+"config.v1+json", config,
					[]testoci.Layer{{MediaType: kit + "model.v1.tar", Data: data}})
				require.NoError(t, err)
			}
			n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host)
			declare := func(v string) {
				repo.WriteFile("devices/cam-017/device.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"+
					"  models:\n    - {name: llm, ref: "+reg.Ref(tag+"-"+v)+", path: /opt/models/llm}\n")
				repo.Commit(tag + " " + v)
			}
			declare("1")
			_, errOut, code := n.tend("apply")
			require.Equal(t, 0, code, errOut)
			declare("2")
			n.crash("", point)
			require.Equal(t, "old weights", n.read("opt/models/llm/model.gguf"))

			before := reg.BlobBytes.Load()
			_, errOut, code = n.tend("apply")
			require.Equal(t, 0, code, "the apply after the crash did not converge:\n%s", errOut)
			require.Equal(t, "new weights", n.read("opt/models/llm/model.gguf"))
			require.Zero(t, reg.BlobBytes.Load()-before, "the layer was downloaded again")
			_, err := os.Stat(filepath.Join(n.state, "blobs", "sha256", testoci.Digest(next)[7:]))
			require.ErrorIs(t, err, fs.ErrNotExist, "the layer's blob is left beside its tree")
			require.DirExists(t, filepath.Join(n.state, "blobs", "trees", "sha256", testoci.Digest(next)[7:]))
			partial, err := os.ReadDir(filepath.Join(n.state, "blobs", "trees", "partial"))
			require.NoError(t, err)
			require.Empty(t, partial, "a tree being built is left")
			require.Empty(t, n.temps(), "temporary files left")
		})
	}
}
