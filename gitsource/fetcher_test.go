package gitsource_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/source"
)

// The Fetcher checks a rewind against the last applied revision only when
// that was read from its own ref, and Applied reads the applied commit
// from the clone alone, named as it was applied.
func TestFetcher(t *testing.T) {
	ctx := context.Background()
	h := newHistory(t)
	f := &gitsource.Fetcher{URL: h.repo.Dir(), Ref: "main", Dir: t.TempDir()}
	paths := []source.Path{{Dir: "devices/cam-017", PerDevice: true}}
	snap, err := f.Fetch(ctx, source.Request{Paths: paths})
	require.NoError(t, err)
	require.Equal(t, source.Revision{Ref: "main", Commit: h.rev["c2"]}, snap.Revision)
	h.change(t, "replay")

	t.Run("the same ref, spelt in full: a rewind is refused", func(t *testing.T) {
		applied := source.Revision{Ref: "refs/heads/main", Commit: h.rev["c2"]}
		snap, err := f.Fetch(ctx, source.Request{Paths: paths, LastApplied: applied})
		require.NoError(t, err)
		require.ErrorIs(t, snap.Stale, source.ErrRewind)
		require.ErrorIs(t, snap.Stale, source.ErrRefused)
		require.Equal(t, h.rev["c2"], snap.Revision.Commit, "held at the last applied commit")
	})
	t.Run("another ref: the check starts over", func(t *testing.T) {
		applied := source.Revision{Ref: "side", Commit: h.rev["c2"]}
		snap, err := f.Fetch(ctx, source.Request{Paths: paths, LastApplied: applied})
		require.NoError(t, err)
		require.NoError(t, snap.Stale)
		require.Equal(t, source.Revision{Ref: "main", Commit: h.rev["c0"]}, snap.Revision)
	})
	t.Run("allowRewind takes it", func(t *testing.T) {
		applied := source.Revision{Ref: "main", Commit: h.rev["c2"]}
		snap, err := f.Fetch(ctx, source.Request{Paths: paths, LastApplied: applied, AllowRewind: true})
		require.NoError(t, err)
		require.NoError(t, snap.Stale)
		require.Equal(t, h.rev["c0"], snap.Revision.Commit)
	})
	t.Run("Applied needs no remote", func(t *testing.T) {
		require.NoError(t, os.Rename(h.repo.Dir(), h.repo.Dir()+".gone"))
		t.Cleanup(func() { _ = os.Rename(h.repo.Dir()+".gone", h.repo.Dir()) })
		applied := source.Revision{Ref: "refs/heads/main", Commit: h.rev["c2"]}
		snap, err := f.Applied(ctx, applied, paths)
		require.NoError(t, err)
		require.NoError(t, snap.Stale)
		require.Equal(t, applied, snap.Revision, "named as it was applied")
		require.Equal(t, "kind: models\nversion: c2\n", content(t, snap, "devices/cam-017/models.yaml"))
	})
}
