package gitsource_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

var cam017 = []string{
	"devices/cam-017/models.yaml",
	"devices/cam-017/services.yml",
	"devices/cam-017/sub/extra.yaml",
}

func TestFetchRefs(t *testing.T) {
	f := newFleet(t)
	cases := []struct {
		name    string
		ref     string
		rev     string
		version string
	}{
		{"branch", "main", f.c1, "1"},
		{"other branch", "feature", f.c2, "2"},
		{"full ref name", "refs/heads/feature", f.c2, "2"},
		{"lightweight tag", "v0", f.c0, "0"},
		{"annotated tag", "v1", f.c1, "1"},
		{"full commit", f.c0, f.c0, "0"},
		{"abbreviated commit", f.c0[:7], f.c0, "0"},
		{"empty ref is remote HEAD", "", f.c1, "1"},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			url := tr.url(t, f)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					src := gitsource.Source{URL: url, Ref: tc.ref, Path: "devices/cam-017"}
					snap, err := fetch(t, t.TempDir(), src)
					require.NoError(t, err)
					require.Equal(t, tc.rev, snap.Revision.Commit)
					require.Equal(t, tc.ref, snap.Revision.Ref)
					require.Equal(t, url, snap.URL)
					require.True(t, snap.Fetched)
					require.Equal(t, cam017, paths(snap))
					require.Equal(t, "kind: models\nversion: "+tc.version+"\n",
						content(t, snap, "devices/cam-017/models.yaml"))
				})
			}
		})
	}
}

func TestFetchPaths(t *testing.T) {
	f := newFleet(t)
	cases := []struct {
		name string
		path string
		want []string
	}{
		{"nested folder", "devices/cam-017", cam017},
		{"nested folder, trailing slash", "devices/cam-017/", cam017},
		{"deeper folder", "devices/cam-017/sub", []string{"devices/cam-017/sub/extra.yaml"}},
		{"parent folder, recursive", "devices", append(append([]string{}, cam017...), "devices/cam-018/device.yaml")},
		{"repo root, dot", ".", append(append(append([]string{}, cam017...), "devices/cam-018/device.yaml"), "root.yaml")},
		{"repo root, empty", "", append(append(append([]string{}, cam017...), "devices/cam-018/device.yaml"), "root.yaml")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := fetch(t, t.TempDir(), gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: tc.path})
			require.NoError(t, err)
			require.Equal(t, tc.want, paths(snap))
			require.IsNonDecreasing(t, paths(snap))
		})
	}
}

func TestFetchUpdates(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			f := newFleet(t)
			dir := filepath.Join(t.TempDir(), "git")
			src := gitsource.Source{URL: tr.url(t, f), Ref: "main", Path: "devices/cam-017"}

			first, err := fetch(t, dir, src)
			require.NoError(t, err)
			require.True(t, first.Fetched)
			shallow, err := git.PlainOpen(dir)
			require.NoError(t, err)
			_, err = shallow.CommitObject(plumbing.NewHash(f.c0))
			require.Error(t, err, "the first fetch is shallow: c0 is not in the clone")
			marker := filepath.Join(dir, "tend-marker")
			require.NoError(t, os.WriteFile(marker, nil, 0o644))

			again, err := fetch(t, dir, src)
			require.NoError(t, err)
			require.False(t, again.Fetched, "nothing new upstream")
			require.Equal(t, first.Revision.Commit, again.Revision.Commit)
			require.Equal(t, first.Files, again.Files)

			f.repo.WriteFile("devices/cam-017/models.yaml", "kind: models\nversion: 3\n")
			f.repo.WriteFile("devices/cam-017/new.yaml", "kind: new\n")
			c3 := f.repo.Commit("c3")
			next, err := fetch(t, dir, src)
			require.NoError(t, err)
			require.True(t, next.Fetched)
			require.Equal(t, c3, next.Revision.Commit)
			require.Equal(t, "kind: models\nversion: 3\n", content(t, next, "devices/cam-017/models.yaml"))
			require.Equal(t, "kind: new\n", content(t, next, "devices/cam-017/new.yaml"))

			// The same bare clone was fetched into, not made again.
			require.FileExists(t, marker)
			clone, err := git.PlainOpen(dir)
			require.NoError(t, err)
			cfg, err := clone.Config()
			require.NoError(t, err)
			require.True(t, cfg.Core.IsBare)
			for _, rev := range []string{f.c1, c3} {
				_, err := clone.CommitObject(plumbing.NewHash(rev))
				require.NoError(t, err, "commit %s in clone", rev)
			}

			// The clone is shallow: an older commit is fetched once, then
			// pinning it again fetches nothing.
			pinned, err := fetch(t, dir, gitsource.Source{URL: src.URL, Ref: f.c0, Path: src.Path})
			require.NoError(t, err)
			require.True(t, pinned.Fetched, "c0 lies past the depth-1 first fetch")
			require.Equal(t, f.c0, pinned.Revision.Commit)
			pinned, err = fetch(t, dir, gitsource.Source{URL: src.URL, Ref: f.c0, Path: src.Path})
			require.NoError(t, err)
			require.False(t, pinned.Fetched)
		})
	}
}

func TestFetchURLChangeKeepsClone(t *testing.T) {
	f := newFleet(t)
	dir := t.TempDir()
	srv := testgit.StartHTTP(t, filepath.Dir(f.repo.Dir()))

	first, err := fetch(t, dir, gitsource.Source{URL: f.repo.Dir(), Ref: "main"})
	require.NoError(t, err)
	require.True(t, first.Fetched)

	second, err := fetch(t, dir, gitsource.Source{URL: f.repo.URL(srv.URL), Ref: "main"})
	require.NoError(t, err)
	require.False(t, second.Fetched, "objects from the old URL are reused")
	require.Equal(t, first.Revision.Commit, second.Revision.Commit)

	clone, err := git.PlainOpen(dir)
	require.NoError(t, err)
	remote, err := clone.Remote("origin")
	require.NoError(t, err)
	require.Equal(t, []string{f.repo.URL(srv.URL)}, remote.Config().URLs)
}

func TestFetchCredentialsStayOffDisk(t *testing.T) {
	f := newFleet(t)
	base := testgit.ServeHTTP(t, filepath.Dir(f.repo.Dir()))
	url := f.repo.URL(base)
	withUser := "http://tend:s3cr3t-token@" + url[len("http://"):]
	dir := t.TempDir()

	snap, err := fetch(t, dir, gitsource.Source{URL: withUser, Ref: "main", Path: "devices/cam-017"})
	require.NoError(t, err)
	require.Equal(t, url, snap.URL)
	require.NotContains(t, snap.String(), "s3cr3t")
	cfg, err := os.ReadFile(filepath.Join(dir, "config"))
	require.NoError(t, err)
	require.NotContains(t, string(cfg), "s3cr3t")
}

func TestFetchLogsAtDebug(t *testing.T) {
	f := newFleet(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := gitsource.Options{Dir: t.TempDir(), Logger: log}
	src := gitsource.Source{URL: f.repo.Dir(), Ref: "main", Path: "devices/cam-017"}

	_, err := gitsource.Fetch(context.Background(), src, opts)
	require.NoError(t, err)
	_, err = gitsource.Fetch(context.Background(), src, opts)
	require.NoError(t, err)
	out := buf.String()
	require.Contains(t, out, "level=DEBUG msg=fetched")
	require.Contains(t, out, "level=DEBUG msg=unchanged")
	require.Contains(t, out, "revision="+f.c1)
	require.NotContains(t, out, "level=INFO")
}

func TestFetchDetachedRemoteHead(t *testing.T) {
	f := newFleet(t)
	f.repo.Checkout(f.c2) // HEAD names a commit, not a branch
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			snap, err := fetch(t, t.TempDir(), gitsource.Source{URL: tr.url(t, f), Path: "devices/cam-017"})
			require.NoError(t, err)
			require.Equal(t, f.c2, snap.Revision.Commit)
			require.True(t, snap.Fetched)
		})
	}
}
