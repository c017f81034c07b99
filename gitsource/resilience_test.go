package gitsource_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/source"
)

func TestServerDown(t *testing.T) {
	f := newFleet(t)
	srv := testgit.StartHTTP(t, filepath.Dir(f.repo.Dir()))
	url := f.repo.URL(srv.URL)
	dir := filepath.Join(t.TempDir(), "clone")
	src := gitsource.Source{URL: url, Ref: "main", Path: "devices/cam-017"}

	first, err := fetch(t, dir, src)
	require.NoError(t, err)
	srv.Close()

	t.Run("without a last applied commit the error is returned", func(t *testing.T) {
		_, err := fetch(t, dir, src)
		require.Error(t, err)
		require.Contains(t, err.Error(), url)
	})
	t.Run("with one, the node is held at it from the clone", func(t *testing.T) {
		src := src
		src.LastApplied = first.Revision.Commit
		snap, err := fetch(t, dir, src)
		require.NoError(t, err)
		require.Equal(t, first.Revision.Commit, snap.Revision.Commit)
		require.Equal(t, first.Files, snap.Files)
		require.Error(t, snap.Stale, "the fetch error is still reported")
		require.Contains(t, snap.Stale.Error(), "unreachable; holding the last applied commit "+first.Revision.Commit[:12])
	})
	t.Run("an agent that starts without network works from the clone", func(t *testing.T) {
		// A fresh Fetch call on the existing clone, as after a restart.
		src := src
		src.LastApplied = first.Revision.Commit
		snap, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir})
		require.NoError(t, err)
		require.NotNil(t, snap.Stale)
	})
	t.Run("a server that is down at start and has no clone fails clearly", func(t *testing.T) {
		_, err := fetch(t, filepath.Join(t.TempDir(), "clone"), gitsource.Source{URL: url, Ref: "main", LastApplied: first.Revision.Commit})
		require.ErrorContains(t, err, "list refs of "+url)
	})
}

func TestDamagedCloneIsClonedAgain(t *testing.T) {
	f := newFleet(t)
	src := gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "devices/cam-017"}
	// Whatever the damage, the next Fetch returns the right commit: go-git
	// refetches what it cannot read, and what it cannot open is cloned
	// again (and logged).
	for name, damage := range map[string]func(t *testing.T, dir string){
		"truncated packs and objects": func(t *testing.T, dir string) {
			n := 0
			_ = filepath.WalkDir(filepath.Join(dir, "objects"), func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					require.NoError(t, os.Truncate(p, 0))
					n++
				}
				return nil
			})
			require.NotZero(t, n)
		},
		"empty ref": func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "refs/remotes/origin/main"), nil, 0o644))
		},
		"garbage config": func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "config"), []byte("[[[not git"), 0o644))
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "clone")
			first, err := fetch(t, dir, src)
			require.NoError(t, err)
			damage(t, dir)
			var logs bytes.Buffer
			snap, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			require.NoError(t, err, logs.String())
			require.Equal(t, first.Revision.Commit, snap.Revision.Commit)
			require.Equal(t, first.Files, snap.Files)
			if name == "garbage config" {
				require.Contains(t, logs.String(), "damaged; cloning again")
			}
		})
		// The damage shows while fetching a new commit: still the clone's,
		// not the remote's; the new commit is taken in the same tick.
		t.Run(name+" with a new commit upstream", func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "clone")
			first, err := fetch(t, dir, src)
			require.NoError(t, err)
			damage(t, dir)
			f.repo.WriteFile("devices/cam-017/next.yaml", "next: "+name+"\n")
			next := f.repo.Commit("next")
			src := src
			src.LastApplied = first.Revision.Commit
			var logs bytes.Buffer
			snap, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			require.NoError(t, err, logs.String())
			require.Nil(t, snap.Stale, "held at the last applied commit:\n%s", logs.String())
			require.Equal(t, next, snap.Revision.Commit)
		})
	}
}

func TestCloneSizeBound(t *testing.T) {
	f := newFleet(t)
	src := gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "devices/cam-017"}
	dir := filepath.Join(t.TempDir(), "clone")
	var last *source.Snapshot
	for i := range 5 {
		f.repo.WriteFile("devices/cam-017/blob.yaml", "data: "+string(bytes.Repeat([]byte{'a' + byte(i)}, 50_000))+"\n")
		f.repo.Commit("grow")
		s, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir, MaxCloneBytes: -1})
		require.NoError(t, err)
		last = s
	}
	grown := dirSize(t, filepath.Join(dir, "objects"))

	src.LastApplied = last.Revision.Commit
	var logs bytes.Buffer
	snap, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir, MaxCloneBytes: 1000, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	require.Equal(t, last.Revision.Commit, snap.Revision.Commit)
	require.Contains(t, logs.String(), "past its size bound")
	require.Less(t, dirSize(t, filepath.Join(dir, "objects")), grown, "the clone shrank")
	require.FileExists(t, filepath.Join(dir, "shallow"), "cloned again at depth 1, not with full history")

	logs.Reset()
	_, err = gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir, MaxCloneBytes: 60_000, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	require.NotContains(t, logs.String(), "past its size bound", "the new clone is small: no clone again on the next tick")

	// The rewind check still has the last applied commit to walk to.
	f.repo.WriteFile("devices/cam-017/next.yaml", "next: 1\n")
	next := f.repo.Commit("next")
	snap, err = gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir})
	require.NoError(t, err)
	require.Equal(t, next, snap.Revision.Commit)
}

// Every fetch of a new commit adds a pack, and reading the clone slows
// with each: past MaxClonePacks a converged device clones again at depth
// 1, so the count stays bounded however many commits it takes.
func TestClonePackBound(t *testing.T) {
	old := gitsource.MaxClonePacks
	gitsource.MaxClonePacks = 3
	t.Cleanup(func() { gitsource.MaxClonePacks = old })
	f := newFleet(t)
	src := gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "devices/cam-017"}
	dir := filepath.Join(t.TempDir(), "clone")
	var logs bytes.Buffer
	opts := gitsource.Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	most := 0
	for i := range 10 {
		f.repo.WriteFile("devices/cam-017/gen.yaml", fmt.Sprintf("generation: %d\n", i))
		rev := f.repo.Commit("next")
		snap, err := gitsource.Fetch(context.Background(), src, opts)
		require.NoError(t, err)
		require.Equal(t, rev, snap.Revision.Commit)
		src.LastApplied = rev // applied: the next tick is converged
		_, err = gitsource.Fetch(context.Background(), src, opts)
		require.NoError(t, err)
		packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.pack"))
		most = max(most, len(packs))
	}
	require.LessOrEqual(t, most, 3, "packs grew past the bound")
	require.Contains(t, logs.String(), "past its pack count bound")
}

func TestNotRetriedWhenPermanent(t *testing.T) {
	f := newFleet(t)
	_, err := fetch(t, t.TempDir(), gitsource.Source{URL: f.repo.Dir(), Ref: "no-such-branch"})
	require.True(t, errors.Is(err, gitsource.ErrRefNotFound))
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	require.NoError(t, filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			n += fi.Size()
		}
		return err
	}))
	return n
}

// A clone made again (after damage) no longer holds the last applied
// commit; the next change must still pass the rewind check, not block the
// device until someone sets allowRewind.
func TestNewCloneStillReachesLastApplied(t *testing.T) {
	f := newFleet(t)
	src := gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "devices/cam-017"}
	dir := filepath.Join(t.TempDir(), "clone")
	first, err := fetch(t, dir, src)
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(dir))

	f.repo.WriteFile("devices/cam-017/next.yaml", "next: 1\n")
	f.repo.Commit("one")
	f.repo.WriteFile("devices/cam-017/next.yaml", "next: 2\n")
	next := f.repo.Commit("two")
	src.LastApplied = first.Revision.Commit
	snap, err := fetch(t, dir, src)
	require.NoError(t, err)
	require.Equal(t, next, snap.Revision.Commit)
}

// A device that was off while hundreds of commits landed is not refused as
// a rewind: the shallow clone is deepened until the walk reaches the last
// applied commit.
func TestFarBehindIsNotARewind(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: builds long histories; make test runs it, -short skips it")
	}
	f := newFleet(t)
	src := gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "devices/cam-017"}
	dir := filepath.Join(t.TempDir(), "clone")
	first, err := fetch(t, dir, src)
	require.NoError(t, err)
	for i := range 300 {
		f.repo.Git("commit", "-q", "--allow-empty", "-m", fmt.Sprint(i))
	}
	src.LastApplied = first.Revision.Commit
	snap, err := fetch(t, dir, src)
	require.NoError(t, err)
	require.Nil(t, snap.Stale)
	require.Equal(t, f.repo.Head(), snap.Revision.Commit)
}

func TestInterruptedFetchLeavesNoPack(t *testing.T) {
	f := newFleet(t)
	src := gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "devices/cam-017"}
	dir := filepath.Join(t.TempDir(), "clone")
	_, err := fetch(t, dir, src)
	require.NoError(t, err)
	left := filepath.Join(dir, "objects/pack/tmp_pack_123456")
	require.NoError(t, os.WriteFile(left, make([]byte, 1<<20), 0o644))
	_, err = fetch(t, dir, src)
	require.NoError(t, err)
	require.NoFileExists(t, left)
}

// A commit rolled back on this node is held as what it is, even when the
// reason it was rolled back quotes a health probe's "connection refused":
// the repo was reached.
func TestQuarantinedIsNotUnreachable(t *testing.T) {
	f := newFleet(t)
	dir := filepath.Join(t.TempDir(), "clone")
	src := gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "devices/cam-017"}
	first, err := fetch(t, dir, src)
	require.NoError(t, err)
	f.repo.WriteFile("devices/cam-017/models.yaml", "kind: models\nversion: broken\n")
	bad := f.repo.Commit("broken")

	src.LastApplied = first.Revision.Commit
	src.Quarantined = map[string]string{bad: `service/web did not become healthy: GET http://127.0.0.1:8080/healthz: dial tcp 127.0.0.1:8080: connect: connection refused`}
	snap, err := fetch(t, dir, src)
	require.NoError(t, err)
	require.Equal(t, first.Revision.Commit, snap.Revision.Commit, "held at the last applied commit")
	require.ErrorIs(t, snap.Stale, source.ErrQuarantined)
	require.NotContains(t, snap.Stale.Error(), "unreachable")
	require.Equal(t, "commit "+bad[:12]+" was rolled back on this node: "+src.Quarantined[bad]+
		"; push a fix as a new commit, or run tend retry to try this one again; holding the last applied commit "+first.Revision.Commit[:12], snap.Stale.Error())
}
