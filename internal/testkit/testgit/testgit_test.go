package testgit_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

func TestRepo(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("devices/cam-017/a.yaml", "a: 1\n")
	first := r.Commit("first")
	require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{40}$`), first)
	require.Equal(t, "main", r.Git("branch", "--show-current"))

	r.Tag("v1")
	r.AnnotatedTag("v1-annotated", "release v1")
	r.Branch("feature")
	r.Remove("devices")
	second := r.Commit("second")
	require.NotEqual(t, first, second)
	require.NoFileExists(t, filepath.Join(r.Dir(), "devices/cam-017/a.yaml"))

	r.Checkout("main")
	require.Equal(t, first, r.Head())
	require.Equal(t, first, r.Git("rev-parse", "v1-annotated^{commit}"))
	require.Equal(t, "tend test", r.Git("log", "-1", "--format=%an"))
}

func TestStartHTTP(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("x.yaml", "x: 1\n")
	head := r.Commit("x")
	srv := testgit.StartHTTP(t, filepath.Dir(r.Dir()))

	for name, url := range map[string]string{
		"repo name":  r.URL(srv.URL),
		"git folder": r.URL(srv.URL) + "/.git",
	} {
		t.Run(name, func(t *testing.T) {
			out := git(t, "ls-remote", url, "refs/heads/main")
			require.Equal(t, head+"\trefs/heads/main", out)
		})
	}

	t.Run("clone", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "clone")
		git(t, "clone", "--quiet", r.URL(srv.URL), dst)
		b, err := os.ReadFile(filepath.Join(dst, "x.yaml"))
		require.NoError(t, err)
		require.Equal(t, "x: 1\n", string(b))
	})

	t.Run("closed", func(t *testing.T) {
		srv.Close()
		srv.Close()
		cmd := exec.Command("git", "ls-remote", r.URL(srv.URL))
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_TERMINAL_PROMPT=0")
		require.Error(t, cmd.Run())
	})
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	return strings.TrimSpace(string(out))
}
