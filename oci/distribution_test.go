package oci

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startDistribution runs Debian's docker-registry (CNCF distribution) as a
// separate server on a free loopback port, with storage in a temp folder,
// and returns its host:port. Without the binary the test is skipped, except
// in CI, where .ci/run installs it and its absence is a failure.
func startDistribution(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("docker-registry is not installed (apt-get install docker-registry)")
		}
		t.Skip("docker-registry is not installed (apt-get install docker-registry)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil, `version: 0.1
log: {level: error}
storage:
  filesystem: {rootdirectory: %s}
  delete: {enabled: true}
http:
  addr: %s
`, filepath.Join(dir, "data"), addr), 0o644))
	cmd := exec.Command(bin, "serve", cfg)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
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
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry did not answer on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestResolveAgainstDistribution(t *testing.T) {
	host := startDistribution(t)
	repo := host + "/models/classifier"
	v81 := push(t, repo, "v8.1.0")
	push(t, repo, "v9.0.0")
	opts := Options{Insecure: []string{host}}
	got, err := Resolve(context.Background(), repo, ">=8.0.0 <9", opts)
	require.NoError(t, err)
	require.Equal(t, "v8.1.0", got.Tag)
	require.Equal(t, v81, got.Digest)

	_, err = Resolve(context.Background(), repo+":v7", "", opts)
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorContains(t, err, repo+":v7")
}
