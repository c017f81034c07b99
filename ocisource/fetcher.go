package ocisource

import (
	"context"
	"log/slog"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/source"
)

// Fetcher is the OCI source of an agent: one artifact URL, the artifacts
// kept in one folder, and one Client whose registry session lasts from
// one fetch to the next, so that a poll is one manifest HEAD.
type Fetcher struct {
	URL    string // oci://HOST/REPO:TAG or oci://HOST/REPO@sha256:…
	Dir    string // where artifacts are kept unpacked, e.g. stateDir/oci
	Client *Client
	Logger *slog.Logger
	// Verify, when set, checks the signatures of the artifact's digest
	// before it is used (the agent's source.verify); it remembers what
	// it verified, so a poll that finds the same digest asks nothing more.
	Verify func(ctx context.Context, repo name.Repository, digest string) error

	bg background // the download of a new layer beside the ticks (see source.Request.Stage)
}

var _ source.Fetcher = (*Fetcher)(nil)

// NewFetcher returns the fetcher of the artifact url, kept in dir, with a
// client that reaches registries with opts.
func NewFetcher(url, dir string, opts transport.Options, log *slog.Logger) *Fetcher {
	return &Fetcher{URL: url, Dir: dir, Client: NewClient(opts), Logger: log}
}

// Fetch reads req.Paths from the artifact f.URL names now (see the
// function Fetch). An artifact's revision names the ref it was published
// from, whatever the URL's tag: the rewind check compares the commit of
// req.LastApplied alone.
func (f *Fetcher) Fetch(ctx context.Context, req source.Request) (*source.Snapshot, error) {
	src := Source{URL: f.URL, Paths: req.Paths, LastApplied: req.LastApplied.Commit,
		AllowRewind: req.AllowRewind, Quarantined: req.Quarantined}
	return Fetch(ctx, src, Options{Dir: f.Dir, Client: f.Client, Logger: f.Logger, Stage: req.Stage, Verify: f.Verify, background: &f.bg})
}

// Stop cancels a background download under way and waits for it to end.
func (f *Fetcher) Stop() { f.bg.stop() }

// Applied reads rev's commit from the artifact kept for it, with no
// registry (see the function Applied); the snapshot is named rev.
func (f *Fetcher) Applied(_ context.Context, rev source.Revision, paths []source.Path) (*source.Snapshot, error) {
	snap, err := Applied(f.Dir, f.URL, rev.Commit, paths)
	if err != nil {
		return nil, err
	}
	snap.Revision.Ref = rev.Ref
	return snap, nil
}
