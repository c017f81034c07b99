package gitsource

import (
	"errors"
	"fmt"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/tend-dev/tend/source"
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
	const resolve = "refusing to rewind; set source.allowRewind: true, or run tend apply --allow-rewind once, to accept it"
	if len(last) != 40 || !looksLikeHash(last) {
		return source.Refuse(source.ErrRewind, nil, "target %s of %s cannot be checked against the last applied revision %q, which is not a full commit hash; %s",
			target, shown, src.LastApplied, resolve)
	}
	lastHash := plumbing.NewHash(last)
	_, err := repo.CommitObject(lastHash)
	missing := errors.Is(err, plumbing.ErrObjectNotFound)
	if err != nil && !missing {
		return fmt.Errorf("read last applied commit %s in the clone: %w", last[:12], err)
	}

	found, edges, err := descends(repo, commit, lastHash, maxRewindWalk)
	switch {
	case !found && err == nil && (len(edges) > 0 || (missing && isShallow(repo))):
		// The clone's history ends before an answer: fetch deeper.
		return &incompleteError{edges: edges}
	case errors.Is(err, errWalkLimit):
		return source.Refuse(source.ErrRewind, err, "target %s of %s: the last applied commit %s is not among the %d newest commits of its history; %s",
			target, shown, last[:12], maxRewindWalk, resolve)
	case err != nil:
		return fmt.Errorf("walk history of %s in %s: %w", target, shown, err)
	case !found:
		return source.Refuse(source.ErrRewind, nil, "target %s of %s does not descend from the last applied commit %s (a force-push or an older commit replayed); %s",
			target, shown, last[:12], resolve)
	}
	return nil
}

var errWalkLimit = errors.New("history walk limit reached")

// errIncomplete says the clone's history is too shallow to tell whether the
// target descends from the last applied commit; the caller fetches deeper
// and asks again.
var errIncomplete = errors.New("history too shallow to check for a rewind")

// incompleteError is errIncomplete with the commits whose parents the
// clone lacks: the fetch that deepens must declare them shallow, or the
// server takes their history as already there. what names the commit
// missing, when one is, for messages.
type incompleteError struct {
	edges []plumbing.Hash
	what  string
}

func (e *incompleteError) Error() string        { return errIncomplete.Error() }
func (e *incompleteError) Is(target error) bool { return target == errIncomplete }

// descends reports whether ancestor is in the history of from (from
// excluded), reading at most limit commits breadth-first, so that recent
// ancestors are found first. Only hashes wait in the queue: a device's
// memory is small. A commit the clone does not hold (past the edge of a
// shallow fetch) ends that line of the walk; the others go on. Every commit
// between a target and a last applied commit it descends from was fetched
// after that commit, so the walk finds it when it is there to find.
//
// edges are the commits read whose parents the clone lacks.
func descends(repo *git.Repository, from *object.Commit, ancestor plumbing.Hash, limit int) (found bool, edges []plumbing.Hash, err error) {
	seen := map[plumbing.Hash]struct{}{from.Hash: {}}
	queue := []plumbing.Hash{from.Hash}
	for read := 0; len(queue) > 0; read++ {
		if read >= limit {
			return false, edges, errWalkLimit
		}
		h := queue[0]
		queue = queue[1:]
		c := from
		if h != from.Hash {
			var err error
			c, err = repo.CommitObject(h)
			if err != nil {
				return false, edges, fmt.Errorf("read commit %s: %w", h.String()[:12], err)
			}
		}
		for _, p := range c.ParentHashes {
			if p == ancestor {
				return true, edges, nil
			}
			if _, err := repo.Storer.EncodedObject(plumbing.CommitObject, p); errors.Is(err, plumbing.ErrObjectNotFound) {
				edges = append(edges, c.Hash)
				continue
			}
			if _, ok := seen[p]; !ok {
				seen[p] = struct{}{}
				queue = append(queue, p)
			}
		}
	}
	return false, edges, nil
}
