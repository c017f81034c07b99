package oldtend

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tend-dev/tend/internal/testkit/testcosign"
)

// Baseline is the commit upgrade tests start from while no release tag
// precedes HEAD: 0b0dbd0, the last commit before the files in stateDir
// carried a format version.
const Baseline = "0b0dbd0576bba316595f9d4478f4a36213f510cc"

// Release is an earlier tend: a commit and what its binary is stamped
// with.
type Release struct {
	Name    string // the tag, or "baseline 0b0dbd0576bb"
	Commit  string // the full hash
	Version string // -X main.version: the tag, or git describe --tags --always of the commit
}

// Previous returns the release an upgrade starts from: the newest tag v*
// (in version order) that is an ancestor of HEAD and does not point at
// HEAD itself, else Baseline. The test is skipped in a shallow clone,
// which may lack both the tags and the commit; it fails outside a Git
// checkout, or when the commit is missing from a full clone, saying what
// to fetch.
func Previous(t testing.TB) Release {
	t.Helper()
	r, skip, err := previous(Baseline, false)
	if err != nil {
		t.Fatalf("upgrade test: %v", err)
	}
	if skip != "" {
		t.Skipf("upgrade test: %s", skip)
	}
	return r
}

// AtBaseline returns Baseline as a release, the last tend of state format
// 1, for tests of what comes from that format whatever the previous
// release is; skipped and failed as Previous is.
func AtBaseline(t testing.TB) Release {
	t.Helper()
	r, skip, err := previous(Baseline, true)
	if err != nil {
		t.Fatalf("upgrade test: %v", err)
	}
	if skip != "" {
		t.Skipf("upgrade test: %s", skip)
	}
	return r
}

// previous finds the release before HEAD in the checkout of the working
// folder, or else baseline (always baseline with only). It returns why the
// test cannot run here when that is a shallow clone.
func previous(baseline string, only bool) (r Release, skip string, err error) {
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return Release{}, "", fmt.Errorf("tend is built at an earlier commit of its Git history, and this is not a Git checkout: %w; run it in a clone of tend", err)
	}
	if shallow, err := git("rev-parse", "--is-shallow-repository"); err == nil && shallow == "true" {
		return Release{}, top + " is a shallow clone: the previous release's tag and commit may be missing from it; " +
			"run git fetch --unshallow --tags to run this test", nil
	}
	tags, err := git("-c", "versionsort.suffix=-", "tag", "--list", "v*", "--merged", "HEAD", "--no-contains", "HEAD", "--sort=-v:refname")
	if err != nil {
		return Release{}, "", fmt.Errorf("list the release tags of %s: %w", top, err)
	}
	if tag, _, _ := strings.Cut(tags, "\n"); tag != "" && !only {
		commit, err := git("rev-parse", "--verify", tag+"^{commit}")
		if err != nil {
			return Release{}, "", fmt.Errorf("tag %s: %w", tag, err)
		}
		return Release{Name: tag, Commit: commit, Version: tag}, "", nil
	}
	if _, err := git("cat-file", "-e", baseline+"^{commit}"); err != nil {
		return Release{}, "", fmt.Errorf("no v* tag precedes HEAD, and the baseline commit %s (oldtend.Baseline) is missing from %s: "+
			"fetch it (git fetch origin %s) or the whole history (git fetch origin)", baseline, top, baseline)
	}
	version, err := git("describe", "--tags", "--always", "--match", "v*", baseline)
	if err != nil {
		return Release{}, "", fmt.Errorf("describe %s: %w", baseline, err)
	}
	return Release{Name: "baseline " + baseline[:12], Commit: baseline, Version: version}, "", nil
}

// Build returns the path of tend built at r's commit, for this machine,
// stamped with r's version and commit as make build stamps a release. It
// is built once per commit and Go version into TEND_TOOLS/oldtend (see
// testcosign.ToolsDir), from git archive of the commit, and renamed into
// place when complete, so that tests running at once never see half a
// binary.
func Build(t testing.TB, r Release) string {
	t.Helper()
	dir := filepath.Join(testcosign.ToolsDir(), "oldtend")
	bin := filepath.Join(dir, fmt.Sprintf("tend-%s-%s-%s-%s", r.Commit, runtime.Version(), runtime.GOOS, runtime.GOARCH))
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := build(t.TempDir(), dir, bin, r); err != nil {
		t.Fatalf("upgrade test: build tend %s: %v", r.Name, err)
	}
	return bin
}

// build extracts r's commit into src and builds tend from it at bin,
// through a temporary file in dir.
func build(src, dir, bin string, r Release) error {
	if err := extract(r.Commit, src); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tend-*")
	if err != nil {
		return err
	}
	tmp.Close()
	defer os.Remove(tmp.Name()) // gone once renamed
	cmd := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-s -w -X main.version="+r.Version+" -X main.commit="+r.Commit,
		"-o", tmp.Name(), "./cmd/tend")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %w\n%s", src, err, out)
	}
	return os.Rename(tmp.Name(), bin)
}

// extract writes the tree of commit into dir: git archive | tar -x, at
// the top of the checkout (in a subfolder, git archive takes only that
// folder).
func extract(commit, dir string) error {
	top, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = top
	var archiveErr, tarOut bytes.Buffer
	archive.Stderr = &archiveErr
	untar := exec.Command("tar", "-x", "-C", dir)
	untar.Stdout, untar.Stderr = &tarOut, &tarOut
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	if err := archive.Run(); err != nil {
		_ = untar.Wait()
		return fmt.Errorf("git archive %s: %w: %s", commit, err, strings.TrimSpace(archiveErr.String()))
	}
	if err := untar.Wait(); err != nil {
		return fmt.Errorf("tar -x of git archive %s: %w: %s", commit, err, strings.TrimSpace(tarOut.String()))
	}
	return nil
}

// git runs git in the working folder and returns its output, trimmed.
func git(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && stderr.Len() > 0 {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(stdout.String()), nil
}
