package testoci

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/testkit/testserver"
)

// StartDistribution runs Debian's docker-registry (CNCF distribution) as a
// separate server on a free loopback port, with storage in a temp folder,
// until the test ends, and returns its host:port. Without the binary the
// test is skipped, except in CI (CI set in the environment), where .ci/run
// installs it and its absence is a failure. With -short it is skipped.
func StartDistribution(t testing.TB) string {
	t.Helper()
	host, _ := StartDistributionProcess(t)
	return host
}

// StartDistributionProcess is StartDistribution, and also returns the
// process id of the server, for a benchmark that reads its CPU time.
func StartDistributionProcess(t testing.TB) (host string, pid int) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: a separate docker-registry server; make test runs it, -short skips it")
	}
	bin := testserver.Program(t, "docker-registry", "docker-registry")
	addr := testserver.FreeAddr(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `version: 0.1
log: {level: error}
storage:
  filesystem: {rootdirectory: %s}
  delete: {enabled: true}
http:
  addr: %s
`, filepath.Join(dir, "data"), addr), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfg)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start docker-registry: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("docker-registry output:\n%s", out.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			return addr, cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry did not answer on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
