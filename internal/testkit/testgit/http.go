package testgit

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// HTTPServer serves Git repositories over smart HTTP with git http-backend.
type HTTPServer struct {
	// URL is the base address, e.g. http://127.0.0.1:41234; the repository
	// in parentDir/NAME is at URL + "/NAME".
	URL string

	srv  *httptest.Server
	once sync.Once
}

// Close stops the server; later requests get "connection refused". It is
// safe to call more than once and is also called on t.Cleanup.
func (s *HTTPServer) Close() { s.once.Do(s.srv.Close) }

// ServeHTTP serves every repository under parentDir and returns the base URL.
// The server stops on t.Cleanup.
func ServeHTTP(t testing.TB, parentDir string) string {
	t.Helper()
	return StartHTTP(t, parentDir).URL
}

// StartHTTP serves every repository under parentDir, bare or not, with the
// real git http-backend (GIT_PROJECT_ROOT=parentDir, GIT_HTTP_EXPORT_ALL=1).
// For a non-bare repository in parentDir/NAME both URL+"/NAME" and
// URL+"/NAME/.git" work. Stop it early with Close.
func StartHTTP(t testing.TB, parentDir string) *HTTPServer {
	t.Helper()
	s := &HTTPServer{srv: httptest.NewServer(backendHandler(t, parentDir))}
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// HTTPHandler is what StartHTTP serves, for a test that puts it behind a
// handler of its own (a server that turns hostile, hangs or trickles).
func HTTPHandler(t testing.TB, parentDir string) http.Handler {
	t.Helper()
	return backendHandler(t, parentDir)
}

// backendHandler runs git http-backend for every repository under
// parentDir.
func backendHandler(t testing.TB, parentDir string) *cgi.Handler {
	t.Helper()
	backend := httpBackend(t)
	root, err := filepath.Abs(parentDir)
	if err != nil {
		t.Fatalf("testgit: %v", err)
	}
	return &cgi.Handler{
		Path: backend,
		Dir:  root,
		Env: append([]string{
			"GIT_PROJECT_ROOT=" + root,
			"GIT_HTTP_EXPORT_ALL=1",
		}, isolatedEnv()...),
		Stderr: logWriter{t, "git http-backend"},
	}
}

// httpBackend finds git-http-backend in git's exec path.
func httpBackend(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("testgit: git --exec-path: %v", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := exec.LookPath(p); err != nil {
		t.Fatalf("testgit: %v", err)
	}
	return p
}

// logWriter sends a child process's or a server's diagnostics to the test
// log, each line prefixed with name.
type logWriter struct {
	t    testing.TB
	name string
}

func (w logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Logf("%s: %s", w.name, strings.TrimSpace(line))
	}
	return len(p), nil
}
