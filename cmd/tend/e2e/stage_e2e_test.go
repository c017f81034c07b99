package e2e

// Staged releases end to end: a `tend agent` stages a release's model in
// the background, from a registry that serves it slowly, while its ticks
// keep the applied release converged; a newer commit supersedes the
// staging; and the activation switches a file and the model it names
// together.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// slowBlobs is a registry middleware that serves the blobs it holds at
// rate bytes per second, flushing every chunk, and holds back the last
// chunk of each until Finish: a download the test watches cannot end
// before the test says so. It counts the GETs of every blob, and says
// when a client gave a slow download up.
type slowBlobs struct {
	rate  int
	blobs map[string][]byte // digest → content

	finish    chan struct{}
	finishing sync.Once
	served    chan string // a slow blob was served whole
	cancelled chan string // a client went away during a slow blob

	mu   sync.Mutex
	gets map[string]int // digest → GETs of that blob, slow or not
}

func serveSlowly(reg *testoci.Registry, rate int, blobs ...[]byte) *slowBlobs {
	s := &slowBlobs{rate: rate, blobs: map[string][]byte{}, finish: make(chan struct{}),
		served: make(chan string, 16), cancelled: make(chan string, 16), gets: map[string]int{}}
	for _, b := range blobs {
		s.blobs[testoci.Digest(b)] = b
	}
	reg.Use(s.serve)
	return s
}

// Finish lets the slow downloads end.
func (s *slowBlobs) Finish() { s.finishing.Do(func() { close(s.finish) }) }

// GETs is how often blob b was asked for.
func (s *slowBlobs) GETs(b []byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets[testoci.Digest(b)]
}

func (s *slowBlobs) serve(w http.ResponseWriter, r *http.Request) bool {
	i := strings.LastIndex(r.URL.Path, "/blobs/")
	if r.Method != http.MethodGet || i < 0 {
		return false
	}
	d := r.URL.Path[i+len("/blobs/"):]
	s.mu.Lock()
	s.gets[d]++
	s.mu.Unlock()
	data, ok := s.blobs[d]
	if !ok {
		return false
	}
	start := 0
	if rg := r.Header.Get("Range"); rg != "" {
		var end int
		if _, err := fmt.Sscanf(rg, "bytes=%d-%d", &start, &end); err != nil || start < 0 || start >= len(data) {
			http.Error(w, "bad range "+rg, http.StatusRequestedRangeNotSatisfiable)
			return true
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, len(data)))
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(len(data)-start))
	if start > 0 {
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	chunk := max(s.rate/10, 1)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	gone := func() bool { s.cancelled <- d; return true }
	for rest := data[start:]; len(rest) > 0; {
		n := min(chunk, len(rest))
		if n == len(rest) {
			select {
			case <-s.finish:
			case <-r.Context().Done():
				return gone()
			}
		}
		if _, err := w.Write(rest[:n]); err != nil {
			return gone()
		}
		w.(http.Flusher).Flush()
		rest = rest[n:]
		if len(rest) == 0 {
			break
		}
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return gone()
		}
	}
	s.served <- d
	return true
}

// staging is the staging of the agent's /status; nil without one.
func (a *runningAgent) staging() map[string]any {
	st, _ := a.status()["staging"].(map[string]any)
	return st
}

// unfinished requires the agent's /status to show a staging of revision
// that has downloaded some of its bytes, not all.
func (a *runningAgent) unfinished(revision string, total int) {
	a.t.Helper()
	st := a.staging()
	require.NotNil(a.t, st, "no staging in status")
	require.Equal(a.t, revision, st["revision"])
	require.Equal(a.t, float64(total), st["totalBytes"])
	require.Greater(a.t, st["bytes"], 0.0)
	require.Less(a.t, st["bytes"], st["totalBytes"])
}

func (a *runningAgent) reconcile() {
	a.t.Helper()
	resp, err := http.Post("http://"+a.addr+"/reconcile", "", nil)
	require.NoError(a.t, err)
	resp.Body.Close()
	require.Equal(a.t, http.StatusAccepted, resp.StatusCode)
}

func receive(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case d := <-ch:
		return d
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: not within 20s", what)
		return ""
	}
}

// While a model downloads slowly (256 KiB/s), the agent stages it in the
// background and keeps the applied release converged: /status shows the
// staging's progress, a hand edit of a managed file is reverted and a
// killed service comes back while the download is unfinished, and
// nothing of the release is switched. A newer commit without the model
// supersedes it: it is applied at once and the download is given up.
func TestAgentStagesWhileReconciling(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	v2 := randomBytes(2<<20, 24)
	reg.PushFiles(t, "models/m:v1", map[string][]byte{"model.onnx": []byte("v1")})
	reg.PushFiles(t, "models/m:v2", map[string][]byte{"model.onnx": v2})
	commit := func(tag string, files ...string) string {
		spec := stageDevice
		if tag != "" {
			spec += "  models:\n    - {name: m, ref: " + reg.Ref("models/m:"+tag) + ", path: /opt/models/m}\n"
		}
		spec += "  files:\n"
		for _, f := range files {
			spec += fmt.Sprintf("    - {path: /etc/infer/%s, content: %s}\n", f, f)
		}
		spec += "  services:\n    - {name: sleeper, command: [/bin/sleep, \"600\"], stopTimeout: 2s}\n"
		repo.WriteFile("devices/cam-017/device.yaml", spec)
		return repo.Commit(strings.Join(append([]string{tag}, files...), " "))
	}
	first := commit("v1", "a")
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host, "--schedule", "@every 1s")
	t.Cleanup(func() { stopServices(t, n.state) })
	a := startAgent(t, n)
	defer a.stop()
	eventually(t, func() bool {
		return a.status()["appliedRevision"] == "HEAD@sha1:"+first && servicePID(t, n.state, "sleeper") != 0
	})
	require.Nil(t, a.staging(), "the first release, applied, stages no more")
	require.Equal(t, "v1", n.read("opt/models/m/model.onnx"))

	slow := serveSlowly(reg, 256<<10, v2)
	t.Cleanup(slow.Finish)
	second := "HEAD@sha1:" + commit("v2", "a", "b")
	a.reconcile()
	eventually(t, func() bool {
		st := a.staging()
		return st != nil && st["revision"] == second && st["bytes"].(float64) > 0
	})
	a.unfinished(second, len(v2))
	require.Equal(t, []any{"model/m"}, a.staging()["resources"])

	n.write("etc/infer/a", "by hand")
	a.reconcile()
	eventually(t, func() bool { return n.read("etc/infer/a") == "a" })
	a.unfinished(second, len(v2)) // reverted while the release stages

	pid := servicePID(t, n.state, "sleeper")
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	eventually(t, func() bool { p := servicePID(t, n.state, "sleeper"); return p != 0 && p != pid })
	a.unfinished(second, len(v2)) // restarted while the release stages

	s := a.status()
	require.Equal(t, "HEAD@sha1:"+first, s["appliedRevision"])
	require.Empty(t, s["lastError"])
	require.Equal(t, "v1", n.read("opt/models/m/model.onnx"), "the model switched while it staged")
	require.NoFileExists(t, filepath.Join(n.root, "etc/infer/b"), "the release's file was applied while it staged")
	require.Equal(t, 1, slow.GETs(v2))

	pid = servicePID(t, n.state, "sleeper")
	third := commit("", "a", "c")
	a.reconcile()
	eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(n.root, "etc/infer/c"))
		return err == nil && string(b) == "c"
	})
	require.Equal(t, testoci.Digest(v2), receive(t, slow.cancelled, "the superseded download given up"))
	eventually(t, func() bool { s := a.status(); return s["staging"] == nil && s["appliedRevision"] == "HEAD@sha1:"+third })
	require.Empty(t, a.status()["lastError"])
	require.NoFileExists(t, filepath.Join(n.root, "etc/infer/b"))
	require.NoFileExists(t, filepath.Join(n.root, "opt/models/m"), "the model is no longer declared")
	require.Equal(t, pid, servicePID(t, n.state, "sleeper"), "the service does not change")
	require.Equal(t, 1, slow.GETs(v2), "the superseded download was not tried again")
	select {
	case <-slow.served:
		t.Fatal("the superseded download was served whole")
	default:
	}
}

// stageDevice is a Device document up to its spec's fields.
const stageDevice = "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"

// A release changes a file and the model whose version the file names.
// The model is staged in the background first (the node keeps both old
// meanwhile); the activation then switches both in one apply that
// downloads nothing. A service that starts only when the two agree (and
// whose health probe checks it) is restarted onto them and is healthy: no
// rollback. A watcher reading the node throughout never sees the new
// file with the old model.
func TestAgentActivatesFileAndModelTogether(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	weights := map[string][]byte{"v1": randomBytes(256<<10, 1), "v2": randomBytes(1<<20, 2)}
	for _, v := range []string{"v1", "v2"} {
		reg.PushFiles(t, "models/m:"+v, map[string][]byte{"version": []byte(v), "weights.bin": weights[v]})
	}
	check := `test "$(cat ${model:m}/version)" = "$(cat ${file:/etc/infer/version})"`
	command, err := json.Marshal([]string{"/bin/sh", "-c", check + " || exit 3; exec /bin/sleep 600"})
	require.NoError(t, err)
	probe, err := json.Marshal([]string{"/bin/sh", "-c", check})
	require.NoError(t, err)
	commit := func(v string) string {
		repo.WriteFile("devices/cam-017/device.yaml", stageDevice+
			"  models:\n    - {name: m, ref: "+reg.Ref("models/m:"+v)+", path: /opt/models/m}\n"+
			"  files:\n    - {path: /etc/infer/version, content: "+v+"}\n"+
			"  services:\n    - name: checker\n      command: "+string(command)+"\n      stopTimeout: 2s\n"+
			"      health: {exec: "+string(probe)+", interval: 100ms, startupGrace: 5s}\n")
		return "HEAD@sha1:" + repo.Commit(v)
	}
	first := commit("v1")
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host,
		"--schedule", "@every 1s", "--log-level", "debug")
	t.Cleanup(func() { stopServices(t, n.state) })
	a := startAgent(t, n)
	defer a.stop()
	eventually(t, func() bool {
		return a.status()["appliedRevision"] == first && servicePID(t, n.state, "checker") != 0
	})
	pid := servicePID(t, n.state, "checker")

	// Watch the node: the file first, then the model, so a pair read is
	// never newer on the model's side than the node was when the file was
	// read (the model switches before the file).
	var mixed atomic.Value
	ctx, stopWatching := context.WithCancel(context.Background())
	watched := make(chan int, 1)
	go func() {
		reads := 0
		for ctx.Err() == nil {
			f, _ := os.ReadFile(filepath.Join(n.root, "etc/infer/version"))
			m, _ := os.ReadFile(filepath.Join(n.root, "opt/models/m/version"))
			if string(f) == "v2" && string(m) != "v2" {
				mixed.CompareAndSwap(nil, fmt.Sprintf("file %q, model %q", f, m))
			}
			reads++
		}
		watched <- reads
	}()
	defer stopWatching()

	slow := serveSlowly(reg, 1<<20, weights["v2"])
	t.Cleanup(slow.Finish)
	second := commit("v2")
	a.reconcile()
	eventually(t, func() bool {
		st := a.staging()
		return st != nil && st["revision"] == second && st["bytes"].(float64) > 0
	})
	a.unfinished(second, len(weights["v2"])+len("v2"))
	require.Equal(t, first, a.status()["appliedRevision"])
	require.Equal(t, "v1", n.read("etc/infer/version"))
	require.Equal(t, "v1", n.read("opt/models/m/version"))

	slow.Finish()
	receive(t, slow.served, "the model's download")
	eventually(t, func() bool {
		s := a.status()
		return s["appliedRevision"] == second && s["staging"] == nil && servicePID(t, n.state, "checker") != 0
	})
	stopWatching()
	require.Positive(t, <-watched)
	require.Nil(t, mixed.Load(), "a read saw the new file with the old model")

	require.Equal(t, "v2", n.read("etc/infer/version"))
	require.Equal(t, "v2", n.read("opt/models/m/version"))
	require.Equal(t, string(weights["v2"]), n.read("opt/models/m/weights.bin"))
	require.NotEqual(t, pid, servicePID(t, n.state, "checker"), "the service was not restarted onto the release")
	s := a.status()
	require.Empty(t, s["lastError"])
	require.Empty(t, s["quarantined"])
	logs := a.logs()
	require.NotContains(t, logs, "rolled back")
	require.Equal(t, 1, slow.GETs(weights["v2"]), "the activation downloaded the model again")
	require.Equal(t, 1, slow.GETs([]byte("v2")), "the activation downloaded the model again")

	// The file of the release was applied once, by the activation, after
	// the model was staged; the model switched in the same apply.
	staged := strings.Index(logs, `msg="release staged" revision=`+second)
	require.Positive(t, staged, logs)
	fileApplied := strings.LastIndex(logs, "msg=applied resource=file/etc/infer/version")
	modelApplied := strings.LastIndex(logs, "msg=applied resource=model/m")
	require.Equal(t, 2, strings.Count(logs, "msg=applied resource=file/etc/infer/version"), logs)
	require.Greater(t, modelApplied, staged, logs)
	require.Greater(t, fileApplied, modelApplied, logs)
	require.NotContains(t, logs[modelApplied:fileApplied], "msg=reconciled", "one apply switches the model and then the file")
}
