package testdocker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long dockerd may take to answer its first ping.
const startTimeout = 60 * time.Second

// state is the test binary's engine and what Main removes at the end.
var state struct {
	mu      sync.Mutex
	main    bool   // Main is running the tests
	started bool   // start was tried
	host    string // unix://… once running
	err     error  // why the engine could not start
	eng     *engine
	cleanup []func()
}

// engine is a running dockerd.
type engine struct {
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when dockerd exited
	log  string
}

// Main runs the package's tests, then stops the engine Host started (if
// any) and removes what the package's images and engine left in temp
// folders. Call it from TestMain: os.Exit(testdocker.Main(m)).
func Main(m *testing.M) int {
	state.mu.Lock()
	state.main = true
	state.mu.Unlock()
	code := m.Run()
	state.mu.Lock()
	defer state.mu.Unlock()
	if state.eng != nil {
		if err := state.eng.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testdocker: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		state.eng = nil
	}
	for i := len(state.cleanup) - 1; i >= 0; i-- {
		state.cleanup[i]()
	}
	state.cleanup = nil
	return code
}

// Host returns the address (unix://…) of the test binary's private Docker
// Engine, starting it on the first call. Without dockerd or root the test
// is skipped, or fails in CI; with -short it is skipped.
func Host(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: a private Docker Engine; make test runs it, -short skips it")
	}
	state.mu.Lock()
	defer state.mu.Unlock()
	if !state.main {
		t.Fatal("testdocker: the package's TestMain must call testdocker.Main, which stops the engine at the end")
	}
	if !state.started {
		state.started = true
		state.eng, state.err = start()
		if state.err == nil {
			state.host = "unix://" + state.eng.socket()
		}
	}
	if state.err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(state.err)
		}
		t.Skip(state.err)
	}
	return state.host
}

// dockerdPath finds dockerd, which Debian installs in /usr/sbin (not in
// every user's PATH).
func dockerdPath() (string, error) {
	if p, err := exec.LookPath("dockerd"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/dockerd"); err == nil {
		return "/usr/sbin/dockerd", nil
	}
	return "", errors.New("dockerd is not installed (apt-get install docker.io)")
}

// start runs dockerd with its own data root, exec root, socket and
// configuration, no bridge and no iptables rules, and waits for its first
// ping.
func start() (*engine, error) {
	bin, err := dockerdPath()
	if err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("dockerd needs root: run the tests as root to run them against a private Docker Engine")
	}
	sweep()
	dir, err := newDir(map[string]string{"daemon.json": "{}\n"})
	if err != nil {
		return nil, err
	}
	return launch(dir, "dockerd.log", nil, bin,
		"--config-file", filepath.Join(dir, "daemon.json"),
		"--data-root", filepath.Join(dir, "d"),
		"--exec-root", filepath.Join(dir, "x"),
		"--pidfile", filepath.Join(dir, "dockerd.pid"),
		"-H", "unix://"+filepath.Join(dir, socketName),
		"--iptables=false", "--ip6tables=false", "--bridge=none",
	)
}

// newDir makes an engine's folder, with its owner file (see sweep) and
// files (name → content). Short paths under /tmp, not $TMPDIR: the socket
// path (and the containerd socket under dockerd's exec root) must fit in
// 108 bytes.
func newDir(files map[string]string) (string, error) {
	dir, err := os.MkdirTemp("/tmp", dirPrefix)
	if err != nil {
		return "", fmt.Errorf("testdocker: %w", err)
	}
	files[ownerFile] = strconv.Itoa(os.Getpid())
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("testdocker: %w", err)
		}
	}
	return dir, nil
}

// launch runs the engine bin with args (and env added to tend's) in dir,
// logging to dir/logName, ending with the test binary even when it is
// killed, and waits until it answers on its socket.
func launch(dir, logName string, env []string, bin string, args ...string) (*engine, error) {
	e := &engine{dir: dir, done: make(chan struct{}), log: filepath.Join(dir, logName)}
	logf, err := os.Create(e.log)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testdocker: %w", err)
	}
	defer logf.Close()
	e.cmd = exec.Command(bin, args...)
	e.cmd.Env = append(os.Environ(), env...)
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := e.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testdocker: start %s: %w", filepath.Base(bin), err)
	}
	go func() {
		_ = e.cmd.Wait()
		close(e.done)
	}()
	if err := e.waitReady(); err != nil {
		_ = e.stop()
		return nil, err
	}
	return e, nil
}

// socketName is the engine's socket in its folder.
const socketName = "d.sock"

func (e *engine) socket() string { return filepath.Join(e.dir, socketName) }

// waitReady polls the engine's /_ping until it answers OK, dockerd exits,
// or startTimeout passes.
func (e *engine) waitReady() error {
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", e.socket())
		},
	}, Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := hc.Get("http://docker/_ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("ping: %s", resp.Status)
		}
		select {
		case <-e.done:
			return fmt.Errorf("%s exited at start (%s):\n%s", filepath.Base(e.cmd.Path), e.cmd.ProcessState, e.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer on %s within %s: %v\n%s", filepath.Base(e.cmd.Path), e.socket(), startTimeout, err, e.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends dockerd (SIGTERM: it stops its containers and its containerd;
// SIGKILL after 30 s) and removes its folders.
func (e *engine) stop() error {
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(30 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.done
	}
	// What the engine left mounted under its data root would make
	// RemoveAll fail: unmount it first. A helper the engine started (such
	// as Podman's container cleanup) may still mount it for a moment:
	// try again for a while.
	var err error
	for range 50 {
		killUnder(e.dir)
		unmountUnder(e.dir)
		if err = os.RemoveAll(e.dir); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("remove the engine's folder: %w", err)
}

// logTail is the end of dockerd's log, for a failure message.
func (e *engine) logTail() string {
	b, err := os.ReadFile(e.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// killUnder kills the processes whose command line names dir: what the
// engine started and left behind (Podman's conmon runs "podman container
// cleanup", which mounts the storage again).
func killUnder(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), dir+"/") {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder detaches every mount point below dir, deepest first, and
// again while some are left (a point can hold mounts stacked on it, as
// Podman's storage does).
func unmountUnder(dir string) {
	for range 5 {
		b, err := os.ReadFile("/proc/self/mounts")
		if err != nil {
			return
		}
		var points []string
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
				points = append(points, f[1])
			}
		}
		if len(points) == 0 {
			return
		}
		for i := len(points) - 1; i >= 0; i-- {
			_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
		}
	}
}

// An engine's folder is /tmp/tdk-*; its owner file holds the pid of the
// test binary that started it.
const (
	dirPrefix = "tdk-"
	ownerFile = "owner"
)

// sweep removes the folders of engines whose test binary was killed
// before Main could stop them (dockerd itself ends with its test binary:
// Pdeathsig).
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join("/tmp", dirPrefix+"*"))
	for _, dir := range dirs {
		if alive(filepath.Join(dir, ownerFile)) || alive(filepath.Join(dir, "dockerd.pid")) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, ownerFile)); err != nil {
			continue // not an engine of ours
		}
		unmountUnder(dir)
		_ = os.RemoveAll(dir)
	}
}

// alive reports whether the pid in file is a running process.
func alive(file string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}

// addCleanup registers f for Main to run after the tests.
func addCleanup(f func()) {
	state.mu.Lock()
	defer state.mu.Unlock()
	state.cleanup = append(state.cleanup, f)
}
