package diff

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/manifest"
)

// Open opens the fleet repo src.URL. A local path (or file:// URL) is read
// in place, as git finds a repository: a bare repository (a server's
// repo, a `git clone --mirror` cache), or the checkout's folder or any
// folder inside it. A URL is mirrored (every branch and tag, with history)
// into dir, which the caller removes, with src.Auth for credentials.
func Open(ctx context.Context, src gitsource.Source, dir string, log *slog.Logger) (*git.Repository, error) {
	if p, ok := strings.CutPrefix(src.URL, "file://"); ok || manifest.IsLocalPath(src.URL) {
		if !ok {
			p = src.URL
		}
		repo, err := openLocal(p)
		if err != nil {
			return nil, fmt.Errorf("open repository %s: %w; run tend in a Git checkout of the fleet repo, or pass --repo with a checkout or a bare repository", p, err)
		}
		return repo, nil
	}
	return gitsource.Mirror(ctx, src, dir, log)
}

// openLocal opens the repository at p. A folder that is itself a Git
// directory (bare) is opened as it is: go-git's DetectDotGit looks only
// for a .git entry, in p and then in every parent, so it would not find a
// bare repository, or would find the checkout a bare repository sits in.
func openLocal(p string) (*git.Repository, error) {
	if isGitDir(p) {
		return git.PlainOpen(p)
	}
	return git.PlainOpenWithOptions(p, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
}

// isGitDir reports whether dir has the layout git requires of a Git
// directory: a HEAD file and the objects and refs folders.
func isGitDir(dir string) bool {
	head, err := os.Stat(filepath.Join(dir, "HEAD"))
	if err != nil || !head.Mode().IsRegular() {
		return false
	}
	for _, sub := range []string{"objects", "refs"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}
