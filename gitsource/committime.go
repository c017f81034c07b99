package gitsource

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/tend-dev/tend/source"
)

// commitTimeSkew is how far a commit's committer time may lie before the
// commits it is built on (an hour, as refusals say): the clocks of two
// people who commit one after the other differ.
const commitTimeSkew = time.Hour

// timeSteps are the depths fetched, one after another, while the clone
// lacks a commit checkCommitTime compares with: a depth of 2 brings the
// first parent of a target at the edge of a shallow clone; the last
// applied commit may lie further back.
var timeSteps = append([]int{2}, deepenSteps...)

// checkTime runs checkCommitTime, fetching the history it needs when the
// clone does not hold it (a shallow clone whose edge is the target).
// refspec fetches the target's history; "" (a commit no ref names) fetches
// every branch and tag with their full history, as update does.
func (f *fetcher) checkTime(ctx context.Context, repo *git.Repository, commit *object.Commit, refspec config.RefSpec) error {
	err := checkCommitTime(repo, commit, f.src, f.shown)
	steps, specs := timeSteps, []config.RefSpec{refspec}
	if refspec == "" {
		steps, specs = []int{unshallow}, fetchAll
	}
	for _, depth := range steps {
		var inc *incompleteError
		if !errors.As(err, &inc) {
			break
		}
		if depth == 2 && len(inc.edges) == 0 {
			continue // the first parent is here: deeper history is wanted
		}
		if serr := markShallow(repo, inc.edges); serr != nil {
			return serr
		}
		remote, rerr := repo.Remote(remoteName)
		if rerr != nil {
			return rerr
		}
		if ferr := fetch(ctx, f.log, remote, f.acc, f.src.URL, f.shown, depth, specs...); ferr != nil {
			return ferr
		}
		err = checkCommitTime(repo, commit, f.src, f.shown)
	}
	var inc *incompleteError
	if errors.As(err, &inc) {
		return source.Refuse(source.ErrUnverified, nil, "commit %s of %s: %s is not in the clone even with the full history, so its committer time cannot be bounded "+
			"(%s has signer validity windows); check that %s serves the whole history of %s",
			commit.Hash.String()[:12], f.shown, inc.what, f.src.Trust.AllowedSigners, f.shown, orHEAD(f.src.Ref))
	}
	return err
}

// checkCommitTime refuses a target whose committer time lies more than
// commitTimeSkew before its first parent's, or before the last applied
// commit's when the target descends from it (not with AllowRewind, which
// accepts older commits). Git checks a signer's validity window at the
// committer time, which whoever commits sets: a key retired by
// valid-before would sign again on a commit dated back. The history the
// target is built on bounds that date: the last applied commit, which
// the node saw, and the first parent, which the target names. Only the
// target is checked: it is the commit whose signature is verified, and
// an attacker chooses the commits in between. A commit the clone lacks is
// an *incompleteError (edges: the target when it is its first parent).
func checkCommitTime(repo *git.Repository, commit *object.Commit, src Source, shown string) error {
	when := commit.Committer.When
	type bound struct {
		what string
		hash plumbing.Hash
		edge bool // missing: the target is the clone's edge
	}
	var bounds []bound
	if len(commit.ParentHashes) > 0 {
		p := commit.ParentHashes[0]
		bounds = append(bounds, bound{"its first parent " + p.String()[:12], p, true})
	}
	if last := strings.ToLower(src.LastApplied); !src.AllowRewind && len(last) == 40 && looksLikeHash(last) && last != commit.Hash.String() {
		bounds = append(bounds, bound{"the last applied commit " + last[:12], plumbing.NewHash(last), false})
	}
	for _, b := range bounds {
		c, err := repo.CommitObject(b.hash)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			inc := &incompleteError{what: b.what}
			if b.edge {
				inc.edges = []plumbing.Hash{commit.Hash}
			}
			return inc
		}
		if err != nil {
			return fmt.Errorf("read %s of %s in the clone: %w", b.what, commit.Hash.String()[:12], err)
		}
		before := c.Committer.When
		if !when.Before(before.Add(-commitTimeSkew)) {
			continue
		}
		return source.Refuse(source.ErrUnverified, nil, "commit %s of %s is dated %s (committer time), before %s, dated %s; "+
			"%s has signer validity windows, which hold at the committer time its author sets, so tend refuses a signed commit dated more than an hour before the history it is built on "+
			"(a retired key signing again); commit again on a clock that is right (git commit --amend --no-edit -S dates it now) and push that",
			commit.Hash.String()[:12], shown, when.UTC().Format(time.RFC3339), b.what, before.UTC().Format(time.RFC3339),
			src.Trust.AllowedSigners)
	}
	return nil
}

// orHEAD names ref for messages: the remote's HEAD when it is "".
func orHEAD(ref string) string {
	if ref == "" {
		return "HEAD"
	}
	return ref
}
