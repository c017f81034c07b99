package agent

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tend-dev/tend/agent/status"

	git "github.com/go-git/go-git/v5"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/ocisource"
)

func publishFleet(t *testing.T, reg *testoci.Registry, repo *testgit.Repo) {
	t.Helper()
	r, err := git.PlainOpen(repo.Dir())
	require.NoError(t, err)
	_, err = ocisource.Publish(context.Background(), r, "main", "oci://"+reg.Ref("fleet:main"), ocisource.PublishOptions{Registry: transport.Options{Insecure: []string{reg.Host}}})
	require.NoError(t, err)
}

// A device following a published artifact: applied as from Git, polled
// with one manifest HEAD, a new publish applied, and while the registry
// is unreachable the node keeps its state, the fetch counts as an error,
// and drift is still reverted from the kept artifact.
func TestOCISource(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "one"))
	one := repo.CommitAt("one", time.Now().Add(-time.Hour))
	publishFleet(t, reg, repo)

	c := newConfig(t, "oci://"+reg.Ref("fleet:main"))
	c.Registries.Insecure = []string{reg.Host}
	h := heldLoopOf(c)
	var held []*Result
	h.opts.OnHold = func(r *Result) { held = append(held, r) }

	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "one", h.file(t))
	require.Equal(t, "main@sha1:"+one, h.tracker.Status().AppliedRevision, "named as from Git")

	var heads, blobs, all atomic.Int64
	reg.Use(func(_ http.ResponseWriter, r *http.Request) bool {
		all.Add(1)
		if r.Method == http.MethodHead && strings.Contains(r.URL.Path, "/manifests/") {
			heads.Add(1)
		}
		if strings.Contains(r.URL.Path, "/blobs/") {
			blobs.Add(1)
		}
		return false
	})
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, status.ResultNoop, h.res.Outcome(nil))
	require.Equal(t, int64(1), heads.Load(), "one manifest HEAD")
	require.Equal(t, int64(0), blobs.Load(), "no download")
	require.Equal(t, int64(1), all.Load(), "nothing else")

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "two"))
	two := repo.Commit("two")
	publishFleet(t, reg, repo)
	h.scheduled()
	require.NoError(t, h.err)
	require.Equal(t, "two", h.file(t))
	require.Equal(t, "main@sha1:"+two, h.tracker.Status().AppliedRevision)

	// The registry goes away.
	reg.Use(func(http.ResponseWriter, *http.Request) bool { panic(http.ErrAbortHandler) })
	h.scheduled()
	require.Error(t, h.err)
	require.Contains(t, h.err.Error(), "is unreachable; holding the last applied commit "+two[:12])
	require.Equal(t, "two", h.file(t), "the node keeps its state")
	got := scrape(t, h.metrics)
	require.Equal(t, 1.0, got[`tend_source_fetch_total{result="error"}`])

	// Drift is reverted during the backoff from the kept artifact.
	require.NoError(t, os.WriteFile(filepath.Join(c.Root, "etc/infer/a"), []byte("edited by hand"), 0o644))
	h.scheduled()
	require.Equal(t, 1, h.heldOff)
	require.Equal(t, "two", h.file(t), "drift reverted")
	require.Len(t, held, 1)
	require.Equal(t, "main@sha1:"+two, held[0].Snapshot.Revision.String())
}
