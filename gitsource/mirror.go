package gitsource

import (
	"context"
	"fmt"
	"log/slog"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"

	"github.com/tend-dev/tend/source"
)

// Mirror brings every branch and tag of src.URL, with full history, into
// the bare repository in dir (made if missing) and returns it. Branches are
// stored as a clone stores them (refs/remotes/origin/*, the remote HEAD as
// refs/remotes/origin/HEAD), so "origin/main" names one. It is for reading
// revisions other than a device's own: tend diff of a fleet repo given by
// URL. src.Ref, src.Path and the checks of Fetch (signature, rewind) do not
// apply; src.Auth does.
func Mirror(ctx context.Context, src Source, dir string, log *slog.Logger) (*git.Repository, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	shown := source.RedactURL(src.URL)
	stored, urlAuth, err := endpoint(src.URL)
	if err != nil {
		return nil, err
	}
	acc, err := src.Auth.access(stored, urlAuth, log)
	if err != nil {
		return nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		acc = acc.withDeadline(d)
	}
	repo, err := openClone(dir, stored)
	if err != nil {
		return nil, err
	}
	remote, err := repo.Remote(remoteName)
	if err != nil {
		return nil, err
	}
	specs := append([]config.RefSpec{"+HEAD:refs/remotes/origin/HEAD"}, fetchAll...)
	if err := fetch(ctx, log, remote, acc, src.URL, shown, 0, specs...); err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	return repo, nil
}
