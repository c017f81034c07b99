package diff

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	git "github.com/go-git/go-git/v5"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/manifest"
)

// Open opens the fleet repo src.URL. A local path is read in place, as git
// finds a repository: the checkout's folder or any folder inside it, or a
// bare repository. A URL is mirrored (every branch and tag, with history)
// into dir, which the caller removes, with src.Auth for credentials.
func Open(ctx context.Context, src gitsource.Source, dir string, log *slog.Logger) (*git.Repository, error) {
	if p, ok := strings.CutPrefix(src.URL, "file://"); ok || manifest.IsLocalPath(src.URL) {
		if !ok {
			p = src.URL
		}
		repo, err := git.PlainOpenWithOptions(p, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
		if err != nil {
			return nil, fmt.Errorf("open repository %s: %w; run tend in a Git checkout of the fleet repo or pass --repo", p, err)
		}
		return repo, nil
	}
	return gitsource.Mirror(ctx, src, dir, log)
}
