package diff

import (
	"context"

	git "github.com/go-git/go-git/v5"

	"github.com/tend-dev/tend/manifest"
)

// SharedRollouts returns the rollouts of the shared source paths at rev
// that parsed, by name, for tend validate --all to say which devices each
// governs and which wave each falls in. With a single source path, or a
// branch per device (rev with {device}: each branch has its own), it
// returns none. The problems of the shared files are ValidateProfiles'.
func SharedRollouts(ctx context.Context, repo *git.Repository, rev string, opts Options) ([]*manifest.Rollout, error) {
	set, missing, err := readShared(ctx, repo, rev, opts)
	if err != nil || set == nil || missing != "" {
		return nil, err // a missing path is ValidateProfiles' to say
	}
	return set.parsed.Rollouts(), nil
}
