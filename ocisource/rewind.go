package ocisource

import (
	"context"
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
//   - a target created before the applied one.
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
	if k.Created.Before(applied.Created) {
		return source.Refuse(source.ErrRewind, nil, "target %s of %s was created %s, before the last applied commit %s (created %s): an older commit pushed to the tag; refusing to rewind; set source.allowRewind: true, or run tend apply --allow-rewind once, to accept it",
			source.ShortCommit(k.Commit), f.shown, k.Created.UTC().Format(time.RFC3339), source.ShortCommit(last), applied.Created.UTC().Format(time.RFC3339))
	}
	return nil
}
