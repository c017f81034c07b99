package testgit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Repo is a non-bare Git repository on disk, driven by the git command line.
// Its methods fail the test on any error.
type Repo struct {
	t   testing.TB
	dir string
}

// NewRepo makes an empty non-bare repository named "fleet" in a fresh
// t.TempDir(), on branch main. Serve its parent folder with StartHTTP and
// reach it at r.URL(server.URL).
func NewRepo(t testing.TB) *Repo {
	t.Helper()
	return NewRepoAt(t, filepath.Join(t.TempDir(), "fleet"))
}

// NewRepoAt makes an empty non-bare repository in dir (created if missing),
// on branch main. Use it to put several repositories under one parent.
func NewRepoAt(t testing.TB, dir string) *Repo {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("testgit: %v", err)
	}
	r := &Repo{t: t, dir: dir}
	r.Git("init", "--quiet", "--initial-branch=main")
	return r
}

// Dir is the repository's working tree.
func (r *Repo) Dir() string { return r.dir }

// Name is the last element of Dir: the path under the served parent folder.
func (r *Repo) Name() string { return filepath.Base(r.dir) }

// URL is the repository's address on a server started with StartHTTP on
// filepath.Dir(r.Dir()): base + "/" + r.Name(). git http-backend finds the
// .git folder of a non-bare repository by itself.
func (r *Repo) URL(base string) string { return strings.TrimSuffix(base, "/") + "/" + r.Name() }

// WriteFile writes content to path (slash-separated, relative to Dir),
// creating parent folders.
func (r *Repo) WriteFile(path, content string) {
	r.t.Helper()
	full := filepath.Join(r.dir, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		r.t.Fatalf("testgit: %v", err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		r.t.Fatalf("testgit: %v", err)
	}
}

// Remove deletes path (a file or a folder) from the working tree.
func (r *Repo) Remove(path string) {
	r.t.Helper()
	if err := os.RemoveAll(filepath.Join(r.dir, filepath.FromSlash(path))); err != nil {
		r.t.Fatalf("testgit: %v", err)
	}
}

// Commit stages every change (git add -A), commits it, even when empty, and
// returns the new commit's full hash.
func (r *Repo) Commit(msg string) string {
	r.t.Helper()
	r.Git("add", "-A")
	r.Git("commit", "--quiet", "--allow-empty", "-m", msg)
	return r.Head()
}

// CommitAt commits as Commit does, with when as the author and committer
// date, and returns the new commit's full hash.
func (r *Repo) CommitAt(msg string, when time.Time) string {
	r.t.Helper()
	r.Git("add", "-A")
	date := when.Format(time.RFC3339)
	r.run([]string{"GIT_AUTHOR_DATE=" + date, "GIT_COMMITTER_DATE=" + date}, "", nil, "commit", "--quiet", "--allow-empty", "-m", msg)
	return r.Head()
}

// Branch creates branch name at HEAD and checks it out.
func (r *Repo) Branch(name string) {
	r.t.Helper()
	r.Git("checkout", "--quiet", "-b", name)
}

// Checkout checks out a branch, tag or commit.
func (r *Repo) Checkout(name string) {
	r.t.Helper()
	r.Git("checkout", "--quiet", name)
}

// Tag creates a lightweight tag at HEAD.
func (r *Repo) Tag(name string) {
	r.t.Helper()
	r.Git("tag", name)
}

// AnnotatedTag creates an annotated tag object at HEAD.
func (r *Repo) AnnotatedTag(name, msg string) {
	r.t.Helper()
	r.Git("tag", "-a", name, "-m", msg)
}

// Head is the full hash of the commit checked out.
func (r *Repo) Head() string {
	r.t.Helper()
	return r.Git("rev-parse", "HEAD")
}

// Git runs git with args in Dir and returns its trimmed standard output.
func (r *Repo) Git(args ...string) string {
	r.t.Helper()
	return r.run(nil, "", nil, args...)
}

// GitInput runs git with args in Dir, stdin on its standard input, and
// returns its trimmed standard output.
func (r *Repo) GitInput(stdin string, args ...string) string {
	r.t.Helper()
	return r.run(nil, stdin, nil, args...)
}

// ResetHard moves the checked-out branch to rev, dropping the commits after
// it: what a force-push does to the branch on the server.
func (r *Repo) ResetHard(rev string) {
	r.t.Helper()
	r.Git("reset", "--quiet", "--hard", rev)
}

// run runs git with the -c options cfg before args, env added to the
// isolated environment and stdin ("" for none).
func (r *Repo) run(env []string, stdin string, cfg []string, args ...string) string {
	r.t.Helper()
	all := append([]string{"-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, cfg...)
	cmd := exec.Command("git", append(all, args...)...)
	cmd.Dir = r.dir
	cmd.Env = append(append(os.Environ(), isolatedEnv()...), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		r.t.Fatalf("testgit: git %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// isolatedEnv keeps the user's and the system's Git configuration out of
// tests and gives commits a fixed identity.
func isolatedEnv() []string {
	return []string{
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=tend test",
		"GIT_AUTHOR_EMAIL=test@tend.invalid",
		"GIT_COMMITTER_NAME=tend test",
		"GIT_COMMITTER_EMAIL=test@tend.invalid",
	}
}
