//go:build linux

package process

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// svcBin is testdata/svc, built once for the whole package.
var svcBin string

// testCgroupParent is the cgroup subtree of this test run, removed at the end.
var testCgroupParent = "tend-test-" + strconv.Itoa(os.Getpid())

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tend-service-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Other users (nobody, in the user switch test) must reach it.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	svcBin = filepath.Join(dir, "svc")
	build := exec.Command("go", "build", "-o", svcBin, "./testdata/svc")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build testdata/svc: %v\n%s", err, out)
		return 1
	}
	defer removeTestCgroups()
	return m.Run()
}

// removeTestCgroups removes what the tests left under testCgroupParent.
func removeTestCgroups() {
	for _, h := range []string{"memory", "cpu", ""} {
		parent := filepath.Join(cgroupMount, h, testCgroupParent)
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.IsDir() {
				_ = os.Remove(filepath.Join(parent, e.Name()))
			}
		}
		for range 50 { // a cgroup just emptied may be busy for a moment
			if err := os.Remove(parent); err == nil || os.IsNotExist(err) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// newTestRuntime is a Runtime logging to the test, under this run's cgroup
// parent.
func newTestRuntime(t *testing.T) *Runtime {
	t.Helper()
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	return New(testCgroupParent, slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

// testWriter logs to the test until it ends: the runtime's reapers may
// log after that, and testing forbids it.
type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(b)))
	}
	return len(b), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}

// start starts in and stops it (SIGKILL at once) when the test ends.
func start(t *testing.T, e *Runtime, in Instance) Proc {
	t.Helper()
	if in.Service == "" {
		in.Service = strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")
	}
	p, err := e.Run(context.Background(), in)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop(context.Background(), p, 0) })
	return p
}

// waitFile waits for path to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil },
		5*time.Second, 5*time.Millisecond, "%s never appeared", path)
}

// waitCtx is a context for one wait in a test.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// svcInfo is what svc -print writes.
type svcInfo struct {
	Args   []string `json:"args"`
	Env    []string `json:"env"`
	Cwd    string   `json:"cwd"`
	UID    int      `json:"uid"`
	GID    int      `json:"gid"`
	Groups []int    `json:"groups"`
}

// runPrint starts svc -print with in, waits for it and decodes its output.
func runPrint(t *testing.T, e *Runtime, in Instance) svcInfo {
	t.Helper()
	in.LogFile = filepath.Join(t.TempDir(), "logs", "svc.log")
	if in.Command == nil {
		in.Command = []string{svcBin, "-print"}
	}
	p := start(t, e, in)
	st, err := e.Wait(waitCtx(t), p)
	require.NoError(t, err)
	out, err := os.ReadFile(in.LogFile)
	require.NoError(t, err)
	require.False(t, st.Failed(), "%s: %s", st, out)
	var info svcInfo
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(out), &info), "%s", out)
	return info
}

// requireRoot skips a test that needs root, except in CI where it fails.
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s needs root, and CI must run it", why)
	}
	t.Skipf("%s needs root: run the tests as root to cover it", why)
}

// gone reports whether pid no longer runs (exited, or a zombie).
func gone(pid int) bool {
	s, err := readProcStat(pid)
	return err != nil || s.State == 'Z' || s.State == 'X'
}
