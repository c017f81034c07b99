package oci

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
)

// DefaultParallel bounds the blobs of one model downloaded at once.
const DefaultParallel = 3

// FetchAll brings every blob in descs into the store, at most parallel at
// once, and returns the bytes downloaded. It stops starting new downloads
// after the first error and returns every error but those of the
// downloads the first one cancelled.
func (s *Store) FetchAll(ctx context.Context, repo name.Repository, descs []v1.Descriptor, parallel int, opts Options) (int64, error) {
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
			n, err := s.Fetch(gctx, repo, d.Digest, d.Size, opts)
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
