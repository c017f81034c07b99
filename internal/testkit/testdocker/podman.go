package testdocker

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	var conf strings.Builder
	conf.WriteString("unqualified-search-registries = []\n")
	for _, r := range insecure {
		fmt.Fprintf(&conf, "[[registry]]\nlocation = %q\ninsecure = true\n", r)
	}
	// Podman raises a container's open-files and process limits to its own
	// defaults, which a sandbox may forbid: keep the test's limits.
	var files, procs syscall.Rlimit
	if err := errors.Join(syscall.Getrlimit(syscall.RLIMIT_NOFILE, &files), syscall.Getrlimit(unix.RLIMIT_NPROC, &procs)); err != nil {
		return nil, fmt.Errorf("testdocker: %w", err)
	}
	dir, err := newDir(map[string]string{
		"registries.conf": conf.String(),
		"containers.conf": fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=%d:%d\"]\n", files.Cur, files.Max, procs.Cur, procs.Max),
	})
	if err != nil {
		return nil, err
	}
	return launch(dir, "podman.log",
		[]string{"CONTAINERS_REGISTRIES_CONF=" + filepath.Join(dir, "registries.conf"), "CONTAINERS_CONF=" + filepath.Join(dir, "containers.conf")},
		bin, "--root", filepath.Join(dir, "r"), "--runroot", filepath.Join(dir, "rr"),
		"--tmpdir", filepath.Join(dir, "t"), "system", "service", "--time", "0", "unix://"+filepath.Join(dir, socketName))
}
