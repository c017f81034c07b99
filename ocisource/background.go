package ocisource

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	blobstore "github.com/tend-dev/tend/oci/store"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/source"
)

// background downloads the layer of one fleet artifact at a time into
// the blob store beside the kept artifacts, beside the agent's ticks (see
// source.Request.Stage). A newer layer supersedes the one downloading.
type background struct {
	mu      sync.Mutex
	digest  v1.Hash
	running bool
	err     error // how the last download ended
	done    atomic.Int64
	total   int64
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// stage makes sure layer l of the artifact shown as what is downloading
// into blobs, and returns the StagingError that says how it goes; ready
// is called when the download ends. A download that failed starts again.
func (b *background) stage(blobs *blobstore.Store, repo name.Repository, l v1.Descriptor, opts transport.Options, what string, rev source.Revision, ready func(), log *slog.Logger) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.digest != l.Digest && b.cancel != nil {
		b.cancel() // superseded
	}
	if b.digest != l.Digest || !b.running {
		if b.digest != l.Digest {
			b.err = nil
			b.done.Store(0)
		}
		b.digest, b.total, b.running = l.Digest, l.Size, true
		ctx, cancel := context.WithCancel(context.Background())
		b.cancel = cancel
		opts.Progress = progress{b, l.Digest}
		log.Info("downloading the fleet artifact in the background", logKeyURL, what, logKeyDigest, l.Digest.String(), "bytes", l.Size)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer cancel()
			_, err := blobs.Fetch(ctx, repo, l.Digest, l.Size, opts)
			b.mu.Lock()
			current := b.digest == l.Digest
			if current {
				b.running, b.err = false, err
			}
			b.mu.Unlock()
			if current && ctx.Err() == nil && ready != nil {
				ready()
			}
		}()
	}
	return &source.StagingError{What: what, Revision: rev, Bytes: b.done.Load(), TotalBytes: b.total, Err: b.err}
}

// stop cancels the download under way and waits for it to end.
func (b *background) stop() {
	b.mu.Lock()
	if b.cancel != nil {
		b.cancel()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

type progress struct {
	b *background
	d v1.Hash
}

func (p progress) Blob(d v1.Hash, done, _ int64) {
	if d == p.d {
		p.b.done.Store(done)
	}
}

// layerPath brings layer l of artifact k into the blob store beside the
// kept artifacts and returns its path: in the Fetch, or in the background
// when the caller asked for that (Options.Stage), returning a
// *source.StagingError until it is whole.
func (f *fetcher) layerPath(ctx context.Context, k *kept, l v1.Descriptor) (string, error) {
	blobs, err := blobstore.NewStore(f.opts.Dir, f.log)
	if err != nil {
		return "", err
	}
	if blobs.HasBlob(l.Digest) {
		return blobs.Path(l.Digest), nil
	}
	if f.opts.Stage != nil && f.opts.background != nil {
		what := fmt.Sprintf("fleet artifact %s", f.shown)
		return "", f.opts.background.stage(blobs, f.ref.Context(), l, f.opts.Client.opts, what, source.Revision{Ref: k.Ref, Commit: k.Commit}, f.opts.Stage, f.log)
	}
	if _, err := blobs.Fetch(ctx, f.ref.Context(), l.Digest, l.Size, f.opts.Client.opts); err != nil {
		return "", fmt.Errorf("download layer %s of %s: %w", l.Digest, f.shown, err)
	}
	return blobs.Path(l.Digest), nil
}
