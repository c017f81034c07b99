package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// tend built with go build in a Git checkout (no ldflags) names the
// commit, its time, and whether the tree was modified, as the Go
// toolchain stamped them. The checkout is a copy of this module's files
// committed to a fresh repository.
func TestVersionFromVCSStamp(t *testing.T) {
	const when = "2026-01-02T15:04:05Z"
	dir, head := checkoutCopy(t, when)
	run := func(env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %v: %s", name, args, out)
		return strings.TrimSpace(string(out))
	}

	bin := filepath.Join(t.TempDir(), "tend")
	build := func() string {
		t.Helper()
		// -buildvcs=true: a GOFLAGS of -buildvcs=false would leave nothing to read.
		run([]string{"GOFLAGS=-buildvcs=true"}, "go", "build", "-trimpath", "-o", bin, "./cmd/tend")
		out, err := exec.Command(bin, "version").Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	platform := regexp.QuoteMeta(runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH)
	// The toolchain (Go 1.24 and later) also makes the module's version a
	// pseudo-version of the commit, +dirty for a modified tree.
	version := `v0\.0\.0-20260102150405-` + head[:12]
	require.Regexp(t, `^tend `+version+` \(commit `+head+`, `+when+`, `+platform+`\)$`, build())

	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("edited\n"), 0o644))
	require.Regexp(t, `^tend `+version+`\+dirty \(commit `+head+`, `+when+`, modified, `+platform+`\)$`, build())
}

// checkoutCopy copies this module's files (tracked and untracked, as in
// the working tree) into a fresh Git repository, committed once at when,
// and returns its folder and commit. Without git, or outside a checkout,
// the test is skipped.
func checkoutCopy(t *testing.T, when string) (dir, head string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	ls, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("not a Git checkout: %v", err)
	}
	dir = t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(ls), "\x00"), "\x00") {
		src := filepath.Join(root, f)
		fi, err := os.Stat(src)
		if os.IsNotExist(err) {
			continue // deleted, not yet committed
		}
		require.NoError(t, err)
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, fi.Mode().Perm()))
	}
	env := append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_AUTHOR_DATE="+when, "GIT_COMMITTER_DATE="+when,
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "tend"}, {"rev-parse", "HEAD"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		head = strings.TrimSpace(string(out))
	}
	return dir, head
}
