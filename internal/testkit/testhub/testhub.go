// Package testhub runs a real tend-hub process for end-to-end tests: it
// builds the binary once per test binary, starts it on a free loopback
// port with a read token, and makes device tokens with tend-hub token
// create.
package testhub

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ReadToken is the read token of every hub Start starts, as a file's
// content and as the password of basic auth.
const ReadToken = "read-secret"

// Hub is a tend-hub process on a loopback port.
type Hub struct {
	t         testing.TB
	Bin       string
	cmd       *exec.Cmd
	URL, DB   string
	TokenFile string // the read token's
	Log       string // its stdout and stderr
	Exited    chan struct{}
}

var (
	builds   = map[string]string{}
	buildsMu sync.Mutex
)

// Build builds tend-hub with tags (space-separated, "" for none) into
// dir, once per test binary and tags, and returns its path.
func Build(dir, tags string) (string, error) {
	buildsMu.Lock()
	defer buildsMu.Unlock()
	if bin, ok := builds[tags]; ok {
		return bin, nil
	}
	_, file, _, _ := runtime.Caller(0)
	pkg := filepath.Join(filepath.Dir(file), "..", "..", "..", "cmd", "tend-hub")
	bin := filepath.Join(dir, "tend-hub"+strings.ReplaceAll(strings.TrimSpace(" "+tags), " ", "-"))
	if out, err := exec.Command("go", "build", "-trimpath", "-tags", tags, "-o", bin, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build tend-hub: %w\n%s", err, out)
	}
	builds[tags] = bin
	return bin, nil
}

// FreeAddr is a loopback address no one listens on, for now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// Start starts bin on db at addr ("" for a free port), with flags more
// and env added to its environment, and waits until it answers /healthz.
// It is killed when the test ends.
func Start(t testing.TB, bin, db, addr string, flags []string, env ...string) *Hub {
	t.Helper()
	dir := t.TempDir()
	if addr == "" {
		addr = FreeAddr(t)
	}
	h := &Hub{t: t, Bin: bin, URL: "http://" + addr, DB: db, TokenFile: filepath.Join(dir, "read-token"), Log: filepath.Join(dir, "hub.log")}
	require.NoError(t, os.WriteFile(h.TokenFile, []byte(ReadToken+"\n"), 0o600))
	f, err := os.Create(h.Log)
	require.NoError(t, err)
	defer f.Close()
	h.cmd = exec.Command(bin, append([]string{"--listen", addr, "--db", db, "--read-token-file", h.TokenFile, "--log-format", "text"}, flags...)...)
	h.cmd.Stdout, h.cmd.Stderr = f, f
	h.cmd.Env = append(os.Environ(), env...)
	require.NoError(t, h.cmd.Start())
	h.Exited = make(chan struct{})
	go func() { _ = h.cmd.Wait(); close(h.Exited) }()
	t.Cleanup(func() { _ = h.cmd.Process.Kill(); <-h.Exited })
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(h.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return h
			}
		}
		select {
		case <-h.Exited:
			t.Fatalf("tend-hub exited at start:\n%s", h.Logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("tend-hub did not answer /healthz within 20s:\n%s", h.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pid is the hub process's.
func (h *Hub) Pid() int { return h.cmd.Process.Pid }

// Kill kills the hub with SIGKILL, as a power cut would, and waits until
// it has ended.
func (h *Hub) Kill() {
	h.t.Helper()
	require.NoError(h.t, h.cmd.Process.Kill())
	<-h.Exited
}

// Logs are what the hub wrote so far.
func (h *Hub) Logs() string {
	b, _ := os.ReadFile(h.Log)
	return string(b)
}

// Run runs h's binary with args and env added to its environment, and
// returns its stdout, stderr and exit code.
func Run(t testing.TB, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return stdout.String(), stderr.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s %v: %v", bin, args, err)
	}
	return stdout.String(), stderr.String(), 0
}

// DeviceToken makes a token for device with tend-hub token create and
// writes it to a file for report.tokenFile, whose path it returns.
func (h *Hub) DeviceToken(device string) string {
	h.t.Helper()
	out, errOut, code := Run(h.t, h.Bin, nil, "token", "create", device, "--db", h.DB)
	require.Equal(h.t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	file := filepath.Join(h.t.TempDir(), "token")
	require.NoError(h.t, os.WriteFile(file, []byte(lines[len(lines)-1]+"\n"), 0o600))
	return file
}

// Get reads path with the read token and requires a 200.
func (h *Hub) Get(path string) string {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.URL+path, nil)
	require.NoError(h.t, err)
	req.SetBasicAuth("me", ReadToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(h.t, http.StatusOK, resp.StatusCode, "%s", b)
	return string(b)
}

// Metric reads one sample of the hub's /metrics; 0 when absent.
func (h *Hub) Metric(name string) float64 {
	h.t.Helper()
	for line := range strings.Lines(h.Get("/metrics")) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(h.t, err, fmt.Sprintf("metric %s", name))
			return f
		}
	}
	return 0
}
