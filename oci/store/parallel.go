package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"

	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
)

// DefaultParallel bounds the blobs of one model downloaded at once.
const DefaultParallel = 3

// FetchAll brings every blob in descs into the store, at most parallel at
// once, and returns the bytes downloaded. It stops starting new downloads
// after the first error and returns every error but those of the
// downloads the first one cancelled.
func (s *Store) FetchAll(ctx context.Context, repo name.Repository, descs []v1.Descriptor, parallel int, opts transport.Options) (int64, error) {
	return fetchEach(ctx, descs, parallel, func(ctx context.Context, d v1.Descriptor) (int64, error) {
		return s.Fetch(ctx, repo, d.Digest, d.Size, opts)
	})
}

// Missing returns the blobs of a not in the store as a needs them: a tar
// layer as its tree (its blob alone is not enough), anything else as its
// blob.
func (s *Store) Missing(a *modelkit.Artifact) []v1.Descriptor {
	tars := a.Tars()
	var out []v1.Descriptor
	for _, d := range a.Blobs() {
		if _, tar := tars[d.Digest]; tar && !s.HasTree(d.Digest) || !tar && !s.HasBlob(d.Digest) {
			out = append(out, d)
		}
	}
	return out
}

// Pull brings descs, blobs of a (see Missing), into the store, at most
// parallel at once: a tar layer as its tree (FetchTree), unpacked under
// b, which the layers unpacked share (nil: no bound), anything else as
// its blob (Fetch). A blob a also links as a file is kept beside the
// tree. It returns the bytes downloaded, and stops and reports errors as
// FetchAll does. The blobs it stores become durable together: the blob
// folder is synced once, after the last of them (and after a failure, for
// those stored before it), not once per blob.
func (s *Store) Pull(ctx context.Context, repo name.Repository, a *modelkit.Artifact, descs []v1.Descriptor, parallel int, b *extract.Budget, opts transport.Options) (int64, error) {
	tars, raw := a.Tars(), a.FileBlobs()
	var blobs atomic.Bool
	n, err := fetchEach(ctx, descs, parallel, func(ctx context.Context, d v1.Descriptor) (int64, error) {
		if e, ok := tars[d.Digest]; ok {
			return s.FetchTree(ctx, repo, e, b, raw[d.Digest], opts)
		}
		blobs.Store(true)
		return s.fetch(ctx, repo, d.Digest, d.Size, opts, func() bool { return s.HasBlob(d.Digest) }, false)
	})
	if blobs.Load() {
		err = errors.Join(err, s.syncBlobs())
	}
	return n, err
}

// fetchEach runs fetch for every blob in descs, at most parallel at once,
// and returns the bytes they downloaded; see FetchAll.
func fetchEach(ctx context.Context, descs []v1.Descriptor, parallel int, fetch func(context.Context, v1.Descriptor) (int64, error)) (int64, error) {
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	var (
		total atomic.Int64
		mu    sync.Mutex
		errs  []error
	)
	started := 0
	for _, d := range descs {
		if gctx.Err() != nil {
			break
		}
		started++
		g.Go(func() error {
			n, err := fetch(gctx, d)
			total.Add(n)
			if err != nil {
				mu.Lock()
				if len(errs) == 0 || !errors.Is(err, context.Canceled) {
					// A sibling cancelled by the first failure says
					// nothing new.
					errs = append(errs, err)
				}
				mu.Unlock()
			}
			return err
		})
	}
	_ = g.Wait() // every error is in errs
	if len(errs) == 0 && started < len(descs) {
		errs = append(errs, fmt.Errorf("download stopped after %d of %d blobs: %w", started, len(descs), ctx.Err()))
	}
	return total.Load(), errors.Join(errs...)
}
