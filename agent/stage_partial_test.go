package agent

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/store"
	"github.com/tend-dev/tend/oci/transport"
)

// A release superseded while it stages leaves no partial download behind
// once the release that superseded it is staged, before any garbage
// collection: a storm of releases, each superseding the last, costs no
// disk. A partial file another download holds (its flock) stays, and so
// does one the new release shares, which it resumes.
func TestSupersededStagingDropsItsPartialDownloads(t *testing.T) {
	reg := testoci.Start(t)
	repo := testgit.NewRepo(t)
	h := newStagedLoop(t, repo, reg)
	c := h.r.Config
	store, err := store.NewStore(c.StateDir, nil)
	require.NoError(t, err)
	commit := func(tag string) {
		repo.WriteFile("devices/cam-017/d.yaml", stageDevice+"  models:\n    - {name: m, ref: "+reg.Ref("models/m:"+tag)+"}\n")
		repo.Commit(tag)
	}
	hash := func(b []byte) v1.Hash {
		h, err := v1.NewHash(testoci.Digest(b))
		require.NoError(t, err)
		return h
	}

	// v1 has three blobs: its staging gets part of the first and the
	// second (which v2 shares), and waits for the third, which another
	// download (a `tend apply --stage-only`) holds part way. A hold sends
	// a whole chunk (the store's chunkSize), which the download writes at once.
	weights := bytes.Repeat([]byte("w1"), 2<<20)
	shared := bytes.Repeat([]byte("s"), 2<<20)
	tokens := bytes.Repeat([]byte("t1"), 1<<20)
	reg.PushFiles(t, "models/m:v1", map[string][]byte{"weights.bin": weights, "shared.bin": shared, "tokens.bin": tokens})
	heldShared := reg.HoldBlob(testoci.Digest(shared), 1<<20)
	t.Cleanup(heldShared.Release)
	var (
		mu     sync.Mutex
		asked  = map[*http.Request]bool{}
		ranges []string // of the GETs of shared, in order
	)
	reg.ObserveBlobs(func(r *http.Request, _ int) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasSuffix(r.URL.Path, testoci.Digest(shared)) && !asked[r] {
			asked[r] = true
			ranges = append(ranges, r.Header.Get("Range"))
		}
	})
	heldWeights := reg.HoldBlob(testoci.Digest(weights), 1<<20)
	heldTokens := reg.HoldBlob(testoci.Digest(tokens), 1<<20)
	t.Cleanup(heldWeights.Release)
	t.Cleanup(heldTokens.Release)

	other := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-other })
	repoRef, err := name.NewRepository(reg.Host+"/models/m", name.Insecure)
	require.NoError(t, err)
	go func() {
		_, err := store.Fetch(ctx, repoRef, hash(tokens), int64(len(tokens)),
			transport.Options{Insecure: []string{reg.Host}})
		other <- err
	}()
	<-heldTokens.Held()
	require.Eventually(t, func() bool { return store.Partial(hash(tokens)) > 0 }, 10*time.Second, 5*time.Millisecond)

	commit("v1")
	h.manual()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Staging)
	<-heldWeights.Held()
	<-heldShared.Held()
	require.Eventually(t, func() bool { return store.Partial(hash(weights)) > 0 && store.Partial(hash(shared)) > 0 },
		10*time.Second, 5*time.Millisecond)

	// v2 supersedes it.
	reg.PushFiles(t, "models/m:v2", map[string][]byte{"weights.bin": []byte("w2"), "shared.bin": shared})
	commit("v2")
	h.manual()
	require.NoError(t, h.err)
	require.NotNil(t, h.res.Staging)
	heldShared.Release()
	<-h.ready
	require.Zero(t, store.Partial(hash(weights)), "the superseded release's partial download is left behind")
	require.NotZero(t, store.Partial(hash(tokens)), "a partial download another download holds is removed")
	require.True(t, store.HasBlob(hash(shared)))
	mu.Lock()
	require.Equal(t, []string{"", fmt.Sprintf("bytes=%d-%d", 1<<20, len(shared)-1)}, ranges,
		"v2 resumes the partial download of the blob it shares with v1")
	mu.Unlock()

	// The other download goes on from where it was.
	heldTokens.Release()
	require.NoError(t, <-other)
	other <- nil
	require.True(t, store.HasBlob(hash(tokens)))
}
