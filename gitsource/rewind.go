package gitsource

import (
	"errors"
	"fmt"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// maxRewindWalk bounds the commits checkRewind reads looking for the last
// applied commit in the target's history.
const maxRewindWalk = 100_000

// checkRewind refuses a target commit that does not descend from the one
// the node last applied, unless src.AllowRewind. The same commit is not a
// rewind. It walks the target's history as far as the clone holds it: a
// target is accepted only when the walk reaches the last applied commit,
// and a last applied commit missing from the clone cannot be reached.
func checkRewind(repo *git.Repository, commit *object.Commit, src Source, shown string) error {
	last := strings.ToLower(src.LastApplied)
	if src.AllowRewind || last == "" || last == commit.Hash.String() {
		return nil
	}
	target := commit.Hash.String()[:12]
	const resolve = "refusing to rewind; set source.allowRewind: true to accept it"
	if len(last) != 40 || !looksLikeHash(last) {
		return refuse(ErrRewind, nil, "target %s of %s cannot be checked against the last applied revision %q, which is not a full commit hash; %s",
			target, shown, src.LastApplied, resolve)
	}
	lastHash := plumbing.NewHash(last)
	switch _, err := repo.CommitObject(lastHash); {
	case errors.Is(err, plumbing.ErrObjectNotFound):
		return refuse(ErrRewind, nil, "target %s of %s cannot be shown to descend from the last applied commit %s: that commit is not in the clone "+
			"(the clone was re-created, or the commit is no longer in the fetched history); refusing to rewind; "+
			"re-fetching the full history that holds it or setting source.allowRewind: true resolves it",
			target, shown, last[:12])
	case err != nil:
		return fmt.Errorf("read last applied commit %s in the clone: %w", last[:12], err)
	}

	found, err := descends(repo, commit, lastHash, maxRewindWalk)
	switch {
	case errors.Is(err, errWalkLimit):
		return refuse(ErrRewind, err, "target %s of %s: the last applied commit %s is not among the %d newest commits of its history; %s",
			target, shown, last[:12], maxRewindWalk, resolve)
	case err != nil:
		return fmt.Errorf("walk history of %s in %s: %w", target, shown, err)
	case !found:
		return refuse(ErrRewind, nil, "target %s of %s does not descend from the last applied commit %s (a force-push or an older commit replayed); %s",
			target, shown, last[:12], resolve)
	}
	return nil
}

var errWalkLimit = errors.New("history walk limit reached")

// descends reports whether ancestor is in the history of from (from
// excluded), reading at most limit commits breadth-first, so that recent
// ancestors are found first. Only hashes wait in the queue: a device's
// memory is small. A commit the clone does not hold (past the edge of a
// shallow fetch) ends that line of the walk; the others go on. Every commit
// between a target and a last applied commit it descends from was fetched
// after that commit, so the walk finds it when it is there to find.
func descends(repo *git.Repository, from *object.Commit, ancestor plumbing.Hash, limit int) (bool, error) {
	seen := map[plumbing.Hash]struct{}{from.Hash: {}}
	queue := []plumbing.Hash{from.Hash}
	for read := 0; len(queue) > 0; read++ {
		if read >= limit {
			return false, errWalkLimit
		}
		h := queue[0]
		queue = queue[1:]
		c := from
		if h != from.Hash {
			var err error
			c, err = repo.CommitObject(h)
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				continue
			}
			if err != nil {
				return false, fmt.Errorf("read commit %s: %w", h.String()[:12], err)
			}
		}
		for _, p := range c.ParentHashes {
			if p == ancestor {
				return true, nil
			}
			if _, ok := seen[p]; !ok {
				seen[p] = struct{}{}
				queue = append(queue, p)
			}
		}
	}
	return false, nil
}
