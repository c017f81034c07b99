package gitsource

import (
	"context"
	"log/slog"

	"github.com/tend-dev/tend/source"
)

// Fetcher is the Git source of an agent: one fleet repo, one ref, one
// clone in Dir, kept for the agent's life.
type Fetcher struct {
	URL    string // as Source.URL
	Ref    string // as Source.Ref
	Auth   Auth
	Trust  Trust  // as Source.Trust: only a target commit it verifies is returned
	Dir    string // the persistent bare clone, e.g. stateDir/git
	Logger *slog.Logger
}

var _ source.Fetcher = (*Fetcher)(nil)

// Fetch reads req.Paths at the commit f.Ref names now (see the function
// Fetch). The rewind check compares with req.LastApplied only when it was
// read from f.Ref: a device moved to another ref by its own config (say
// from main to devices/cam-017) starts its rewind check over, as the new
// ref need not descend from the old one, and the move was made on the
// node, not pushed to the repo.
func (f *Fetcher) Fetch(ctx context.Context, req source.Request) (*source.Snapshot, error) {
	src := Source{URL: f.URL, Ref: f.Ref, Paths: req.Paths, Auth: f.Auth, Trust: f.Trust,
		AllowRewind: req.AllowRewind, Quarantined: req.Quarantined}
	if req.LastApplied.SameRef(source.Revision{Ref: f.Ref}) {
		src.LastApplied = req.LastApplied.Commit
	}
	return Fetch(ctx, src, Options{Dir: f.Dir, Logger: f.Logger})
}

// Applied reads rev's commit from the clone: a commit named by its full
// hash that is in the clone needs no fetch. It checks no signature: the
// commit was verified when it was applied.
func (f *Fetcher) Applied(ctx context.Context, rev source.Revision, paths []source.Path) (*source.Snapshot, error) {
	src := Source{URL: f.URL, Ref: rev.Commit, Paths: paths, LastApplied: rev.Commit, Auth: f.Auth}
	snap, err := Fetch(ctx, src, Options{Dir: f.Dir, Logger: f.Logger})
	if err != nil {
		return nil, err
	}
	snap.Revision.Ref = rev.Ref // named as it was applied
	return snap, nil
}
