package testdocker

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Podman starts a private Podman service (podman system service, its
// Docker-compatible API) for one test, with its own storage and socket,
// pulling from the given registries (host:port) over plain HTTP, and
// returns its address (unix://…); the test's cleanup stops it. Without
// podman or root the test is skipped, or fails in CI; with -short it is
// skipped.
func Podman(t testing.TB, insecure ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: a private Podman service; make test runs it, -short skips it")
	}
	e, err := startPodman(insecure)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Error(err)
		}
	})
	return "unix://" + e.socket()
}

func startPodman(insecure []string) (*engine, error) {
	bin, err := exec.LookPath("podman")
	if err != nil {
		return nil, errors.New("podman is not installed (apt-get install podman)")
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("podman's service needs root here: run the tests as root to run them against Podman")
	}
	dir, err := os.MkdirTemp("/tmp", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("testdocker: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testdocker: %w", err)
	}
	var conf strings.Builder
	conf.WriteString("unqualified-search-registries = []\n")
	for _, r := range insecure {
		fmt.Fprintf(&conf, "[[registry]]\nlocation = %q\ninsecure = true\n", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "registries.conf"), []byte(conf.String()), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testdocker: %w", err)
	}
	// Podman raises a container's open-files and process limits to its own
	// defaults, which a sandbox may forbid: keep the test's limits.
	var files, procs syscall.Rlimit
	if err := errors.Join(syscall.Getrlimit(syscall.RLIMIT_NOFILE, &files), syscall.Getrlimit(unix.RLIMIT_NPROC, &procs)); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testdocker: %w", err)
	}
	containersConf := fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=%d:%d\"]\n", files.Cur, files.Max, procs.Cur, procs.Max)
	if err := os.WriteFile(filepath.Join(dir, "containers.conf"), []byte(containersConf), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testdocker: %w", err)
	}
	e := &engine{dir: dir, done: make(chan struct{}), log: filepath.Join(dir, "podman.log")}
	logf, err := os.Create(e.log)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testdocker: %w", err)
	}
	defer logf.Close()
	e.cmd = exec.Command(bin, "--root", filepath.Join(dir, "r"), "--runroot", filepath.Join(dir, "rr"),
		"--tmpdir", filepath.Join(dir, "t"), "system", "service", "--time", "0", "unix://"+e.socket())
	e.cmd.Env = append(os.Environ(), "CONTAINERS_REGISTRIES_CONF="+filepath.Join(dir, "registries.conf"),
		"CONTAINERS_CONF="+filepath.Join(dir, "containers.conf"))
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := e.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("testdocker: start podman: %w", err)
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
