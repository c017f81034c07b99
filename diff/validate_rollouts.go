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
	src, err := parseSources(opts)
	if err != nil || !src.several() || perDevice(rev) {
		return nil, err
	}
	commit, err := resolve(repo, rev)
	if err != nil {
		return nil, err
	}
	trees, err := sharedTrees(repo, commit, src.shared)
	if err != nil {
		return nil, err
	}
	for _, t := range trees {
		if t.Tree.IsZero() {
			return nil, nil // ValidateProfiles says so
		}
	}
	set, err := newReader(repo).sharedAt(&location{Commit: commit.Hash, Rev: rev, Shared: trees})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return set.parsed.Rollouts(), nil
}
