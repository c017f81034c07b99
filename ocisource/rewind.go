package ocisource

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tend-dev/tend/source"
)

// check refuses a target this node must not apply: a commit it rolled
// back, or a rewind (see checkRewind). It runs on the manifest, before
// the layer is downloaded, so a refused target costs one manifest.
func (f *fetcher) check(ctx context.Context, k *kept) error {
	if why, ok := f.src.Quarantined[k.Commit]; ok {
		return source.Refuse(source.ErrQuarantined, nil, "commit %s was rolled back on this node: %s; push a fix as a new commit, or run tend retry to try this one again", source.ShortCommit(k.Commit), why)
	}
	return f.checkRewind(ctx, k)
}

// checkRewind refuses, unless src.AllowRewind, a target that would roll
// the node back from the artifact of the last applied commit:
//   - another artifact claiming the applied commit with other content
//     (a layer of another digest): applying it would change the node
//     while its revision still named the applied commit;
//   - a target created before the applied one, unless its ancestry
//     (AnnotationAncestors) holds the applied commit: a child commit made
//     on a clock behind is not a rewind;
//   - a target the applied artifact's ancestry holds: an older commit,
//     whatever the clocks said.
//
// When the applied artifact is not kept (the node followed a Git source
// before, or its stateDir lost it) there is nothing to compare with, and
// the target is taken.
func (f *fetcher) checkRewind(ctx context.Context, k *kept) error {
	last := strings.ToLower(f.src.LastApplied)
	if f.src.AllowRewind || last == "" {
		return nil
	}
	applied, ok := f.st.byCommit(last)
	if !ok {
		if last != k.Commit {
			f.log.DebugContext(ctx, "no kept artifact of the last applied commit; the rewind check has nothing to compare with", logKeyURL, f.shown, logKeyRevision, last)
		}
		return nil
	}
	if last == k.Commit {
		if applied.Digest == k.Digest || (applied.Layer != "" && applied.Layer == k.Layer) {
			return nil
		}
		return source.Refuse(source.ErrRewind, nil, "artifact %s of %s claims commit %s, which this node applied from artifact %s with other content; "+
			"refusing to change the node under the same commit; publish the change as a new commit, or set source.allowRewind: true, or run tend apply --allow-rewind once, to accept it",
			k.Digest, f.shown, source.ShortCommit(last), applied.Digest)
	}
	if has(k.Ancestors, last) {
		return nil
	}
	if k.Created.Before(applied.Created) {
		within := ""
		if len(k.Ancestors) > 0 {
			within = fmt.Sprintf(" and its %d nearest ancestors do not hold it", len(k.Ancestors))
		}
		return source.Refuse(source.ErrRewind, nil, "target %s of %s was created %s, before the last applied commit %s (created %s)%s: an older commit pushed to the tag; refusing to rewind; set source.allowRewind: true, or run tend apply --allow-rewind once, to accept it",
			source.ShortCommit(k.Commit), f.shown, k.Created.UTC().Format(time.RFC3339), source.ShortCommit(last), applied.Created.UTC().Format(time.RFC3339), within)
	}
	if has(applied.Ancestors, k.Commit) {
		return source.Refuse(source.ErrRewind, nil, "target %s of %s is an ancestor of the last applied commit %s: an older commit pushed to the tag; refusing to rewind; set source.allowRewind: true, or run tend apply --allow-rewind once, to accept it",
			source.ShortCommit(k.Commit), f.shown, source.ShortCommit(last))
	}
	return nil
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// MaxAncestors is how many commits tend publish lists in
// AnnotationAncestors, and how many a device reads.
const MaxAncestors = 100

// parseAncestors reads AnnotationAncestors: full commit hashes separated
// by commas, at most MaxAncestors; "" is none (flux push artifact).
func parseAncestors(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if n := strings.Count(s, ",") + 1; n > MaxAncestors {
		return nil, fmt.Errorf("annotation %s lists %d commits, more than %d", AnnotationAncestors, n, MaxAncestors)
	}
	out := strings.Split(s, ",")
	for _, c := range out {
		if !source.IsCommit(c) {
			return nil, fmt.Errorf("annotation %s holds %s, not a full commit hash in lower case", AnnotationAncestors, source.Quote(c))
		}
	}
	return out, nil
}
