package oldtend

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// The release before HEAD: the newest v* tag in version order among
// HEAD's ancestors, not HEAD's own, an annotated tag read as its commit;
// the baseline while there is none.
func TestPrevious(t *testing.T) {
	repo := testgit.NewRepo(t)
	first := repo.Commit("first")
	repo.Tag("v0.1.0")
	repo.Tag("release-9")
	rc := repo.Commit("rc")
	repo.AnnotatedTag("v0.2.0-rc.1", "release candidate")
	repo.Branch("side")
	repo.Commit("side")
	repo.Tag("v0.3.0")
	repo.Checkout("main")
	repo.Commit("final")
	repo.Tag("v0.2.0")
	t.Chdir(repo.Dir())

	r, skip, err := previous(first, false)
	require.NoError(t, err)
	require.Empty(t, skip)
	require.Equal(t, Release{Name: "v0.2.0-rc.1", Commit: rc, Version: "v0.2.0-rc.1"}, r,
		"v0.2.0 is HEAD's own, v0.3.0 not an ancestor, release-9 no v* tag")

	repo.Commit("after the release")
	r, _, err = previous(first, false)
	require.NoError(t, err)
	require.Equal(t, "v0.2.0", r.Name)
	r, _, err = previous(first, true)
	require.NoError(t, err)
	require.Equal(t, first, r.Commit, "the baseline alone, whatever the tags")

	t.Run("no release yet", func(t *testing.T) {
		repo := testgit.NewRepo(t)
		base := repo.Commit("base")
		repo.Commit("head")
		t.Chdir(repo.Dir())
		r, skip, err := previous(base, false)
		require.NoError(t, err)
		require.Empty(t, skip)
		require.Equal(t, Release{Name: "baseline " + base[:12], Commit: base, Version: base[:7]}, r)

		_, _, err = previous("0123456789abcdef0123456789abcdef01234567", false)
		require.EqualError(t, err, "no v* tag precedes HEAD, and the baseline commit 0123456789abcdef0123456789abcdef01234567 "+
			"(oldtend.Baseline) is missing from "+repo.Dir()+": fetch it (git fetch origin 0123456789abcdef0123456789abcdef01234567) "+
			"or the whole history (git fetch origin)")
	})

	t.Run("shallow clone", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "shallow")
		repo.Git("clone", "--quiet", "--depth", "1", "file://"+repo.Dir(), dir)
		t.Chdir(dir)
		_, skip, err := previous(first, false)
		require.NoError(t, err)
		require.Equal(t, dir+" is a shallow clone: the previous release's tag and commit may be missing from it; "+
			"run git fetch --unshallow --tags to run this test", skip)
	})

	t.Run("no checkout", func(t *testing.T) {
		t.Chdir(t.TempDir())
		_, _, err := previous(first, false)
		require.ErrorContains(t, err, "this is not a Git checkout")
		require.ErrorContains(t, err, "run it in a clone of tend")
	})
}
