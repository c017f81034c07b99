package diff_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// TestOpenBareRepository: a bare repository (a server's repo, a `git
// clone --mirror` cache) opens as a path and as a file:// URL, and one
// that sits inside another checkout opens as itself, not as that
// checkout.
func TestOpenBareRepository(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("devices/cam-1/device.yaml", device("cam-1", "v1", false))
	r.Commit("one")
	r.WriteFile("devices/cam-1/device.yaml", device("cam-1", "v2", false))
	head := r.Commit("two")

	mirror := filepath.Join(t.TempDir(), "mirror.git")
	r.Git("clone", "--quiet", "--mirror", r.Dir(), mirror)
	// A bare repository inside another repository's checkout.
	outer := testgit.NewRepo(t)
	outer.WriteFile("README.md", "not the fleet\n")
	outer.Commit("outer")
	pushed := filepath.Join(outer.Dir(), "server", "fleet.git")
	r.Git("init", "--quiet", "--bare", "--initial-branch=main", pushed)
	r.Git("push", "--quiet", pushed, "main")

	for name, url := range map[string]string{
		"mirror path":            mirror,
		"mirror file URL":        "file://" + mirror,
		"bare inside a checkout": pushed,
		"pushed file URL":        "file://" + pushed,
	} {
		t.Run(name, func(t *testing.T) {
			repo, err := diff.Open(context.Background(), gitsource.Source{URL: url}, t.TempDir(), slog.New(slog.DiscardHandler))
			require.NoError(t, err)
			res, err := diff.Run(context.Background(), repo, "main~1", "main", diff.Options{Path: "devices/{device}"})
			require.NoError(t, err)
			require.Equal(t, head, res.Head.Commit)
			require.Equal(t, map[string]diff.Status{"cam-1": diff.Changed}, names(res.Devices))
		})
	}

	t.Run("a checkout and a folder inside it still open", func(t *testing.T) {
		for _, p := range []string{r.Dir(), filepath.Join(r.Dir(), "devices", "cam-1")} {
			repo, err := diff.Open(context.Background(), gitsource.Source{URL: p}, t.TempDir(), nil)
			require.NoError(t, err)
			h, err := repo.Head()
			require.NoError(t, err)
			require.Equal(t, head, h.Hash().String())
		}
	})
}
