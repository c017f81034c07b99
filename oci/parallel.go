package oci

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DefaultParallel bounds the blobs of one model downloaded at once.
const DefaultParallel = 3

// FetchAll brings every blob in descs into the store, at most parallel at
// once, and returns the bytes downloaded. It stops starting new downloads
// after the first error and returns every error.
func (s *Store) FetchAll(ctx context.Context, repo name.Repository, descs []v1.Descriptor, parallel int, opts Options) (int64, error) {
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		errs  []error
		total atomic.Int64
		slots = make(chan struct{}, parallel)
	)
	for _, d := range descs {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(d v1.Descriptor) {
			defer wg.Done()
			defer func() { <-slots }()
			n, err := s.Fetch(ctx, repo, d.Digest, d.Size, opts)
			total.Add(n)
			if err != nil {
				mu.Lock()
				if len(errs) == 0 || !errors.Is(err, context.Canceled) {
					// A sibling cancelled by the first failure says
					// nothing new.
					errs = append(errs, err)
				}
				mu.Unlock()
				cancel()
			}
		}(d)
	}
	wg.Wait()
	return total.Load(), errors.Join(errs...)
}
