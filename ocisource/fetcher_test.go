package ocisource_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/ocisource"
	"github.com/tend-dev/tend/source"
)

// The Fetcher keeps one registry session from one fetch to the next (a
// poll is one manifest HEAD), compares the commit alone of the last
// applied revision (an artifact names the ref it was published from,
// whatever the tag), and Applied names what it reads as it was applied.
func TestFetcher(t *testing.T) {
	ctx := context.Background()
	reg := testoci.Start(t)
	origin, older := fleetRepo(t, "old", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	origin.WriteFile("devices/cam-017/d.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec: {}\n")
	newer := origin.CommitAt("newer", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	publish(t, reg.Host, origin.Dir(), "main", "fleet:main")
	f := ocisource.NewFetcher("oci://"+reg.Host+"/fleet:main", t.TempDir(), registryOptions(reg.Host), nil)

	snap, err := f.Fetch(ctx, source.Request{Paths: paths})
	require.NoError(t, err)
	require.Equal(t, source.Revision{Ref: "main", Commit: newer}, snap.Revision)
	c := count(reg)
	snap, err = f.Fetch(ctx, source.Request{Paths: paths})
	require.NoError(t, err)
	require.False(t, snap.Fetched)
	require.Equal(t, int64(1), c.all.Load(), "the session lasts: one manifest HEAD, nothing else")

	publish(t, reg.Host, origin.Dir(), older, "fleet:main")
	applied := source.Revision{Ref: "devices/cam-017", Commit: newer}
	snap, err = f.Fetch(ctx, source.Request{Paths: paths, LastApplied: applied})
	require.NoError(t, err)
	require.ErrorIs(t, snap.Stale, source.ErrRewind, "the commit alone counts, whatever the ref")
	require.ErrorIs(t, snap.Stale, source.ErrRefused)
	require.Equal(t, newer, snap.Revision.Commit, "held")

	held, err := f.Applied(ctx, applied, paths)
	require.NoError(t, err)
	require.Equal(t, applied, held.Revision, "named as it was applied")
	require.Equal(t, []string{"devices/cam-017/d.yaml", "profiles/base.yaml"}, fileNames(held))
	require.Equal(t, "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec: {}\n", string(held.Files[0].Data), "the applied commit's, not the target's")
}
