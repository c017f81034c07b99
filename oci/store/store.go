package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	ggcrtransport "github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/internal/flock"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/oci/transport"
)

// ErrNotStored means a manifest or blob a model version needs is not in
// the store yet; fetching it again will bring it.
var ErrNotStored = errors.New("not in the blob store")

// Store is the content-addressed blob store, stateDir/blobs/sha256/<hex>,
// shared by every model and version. A blob is written to a partial file
// while it is hashed, and renamed into the store only when its digest
// matches, so a blob in the store is always whole and right.
type Store struct {
	dir statedir.Blobs
	log *slog.Logger
}

// listedItems is how many items of a list (the blobs a version lacks) an
// error quotes.
const listedItems = 10

// Log keys.
const (
	logKeyDigest = "digest"
	logKeyOffset = "offset"
	logKeyError  = "error"
)

// NewStore opens (creating) the blob store under stateDir.
func NewStore(stateDir string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{dir: statedir.Dir(stateDir).Blobs(), log: log}
	for _, d := range []string{s.dir.Stored("sha256"), s.dir.Partials()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("blob store: %w", err)
		}
	}
	return s, nil
}

// Path is where the blob with digest d lives once stored.
func (s *Store) Path(d v1.Hash) string { return s.dir.Blob(d.Algorithm, d.Hex) }

func (s *Store) partial(d v1.Hash) string {
	return s.dir.Partial(d.Algorithm, d.Hex)
}

// Partial returns how many bytes of blob d an interrupted download left.
func (s *Store) Partial(d v1.Hash) int64 {
	fi, err := os.Stat(s.partial(d))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// Has reports whether blob d is in the store: as a blob, or for a tar
// layer as its complete tree (see Unpack).
func (s *Store) Has(d v1.Hash) bool {
	return s.HasBlob(d) || s.HasTree(d)
}

// fetchAttempts bounds how often one Fetch resumes after a dropped
// connection before it gives up until the next tick; resumeBackoff spaces
// the attempts.
var (
	fetchAttempts = 5
	resumeBackoff = backoff.Exponential{Initial: 200 * time.Millisecond, Max: 2 * time.Second}
)

// Fetch brings blob d (of the given size) of repo into the store. A blob
// already there is not downloaded again. A partial download, from a dropped
// connection or an earlier run, is resumed with an HTTP Range request from
// where it stopped. Two Fetches of one blob, in this process or another
// on the same stateDir, never download it at once: the second waits for
// the first (see lockPartial) and then finds it stored, or resumes what
// the first left. It returns the bytes downloaded by this call.
func (s *Store) Fetch(ctx context.Context, repo name.Repository, d v1.Hash, size int64, opts transport.Options) (int64, error) {
	return s.fetch(ctx, repo, d, size, opts, func() bool { return s.HasBlob(d) }, true)
}

// fetch is Fetch, done once stored reports the blob is in the store as
// its caller needs it: as a blob, or for FetchTree as a blob or a tree.
// Without syncDir the blob folder is not synced after the blob is
// renamed into it: the caller syncs it once for a batch (see Pull).
func (s *Store) fetch(ctx context.Context, repo name.Repository, d v1.Hash, size int64, opts transport.Options, stored func() bool, syncDir bool) (int64, error) {
	if d.Algorithm != "sha256" {
		return 0, fmt.Errorf("blob %s: only sha256 digests are supported", d)
	}
	report := func(int64) {}
	if opts.Progress != nil {
		report = func(done int64) { opts.Progress.Blob(d, done, size) }
	}
	if stored() {
		report(size)
		return 0, nil
	}
	if d == emptyJSON {
		// The OCI empty descriptor's blob (an ORAS artifact's config): its
		// bytes are its digest's, no need to ask.
		if err := s.Put(d, []byte("{}")); err != nil {
			return 0, err
		}
		report(size)
		return 0, nil
	}
	client, err := opts.BlobClient(ctx, repo)
	if err != nil {
		return 0, err
	}
	var total int64
	for attempt := 1; ; attempt++ {
		n, err := s.download(ctx, client, repo, d, size, report, stored, syncDir)
		total += n
		if err == nil {
			failpoint.Hit("blob:stored")
			return total, nil
		}
		if ctx.Err() != nil || errors.Is(err, transport.ErrDigestMismatch) || attempt >= fetchAttempts || n == 0 && attempt > 1 {
			return total, fmt.Errorf("download %s@%s: %w", repo, d, err)
		}
		s.log.WarnContext(ctx, "download interrupted; resuming", logKeyDigest, d.String(), logKeyError, err.Error())
		if err := backoff.Sleep(ctx, resumeBackoff.Delay(attempt)); err != nil {
			return total, err
		}
	}
}

// download takes the blob's lock (lockPartial), appends to the partial
// file from its current length, hashing everything, checks the digest
// once size bytes are there, and moves the blob into the store, all while
// it holds the lock. A blob another downloader stored while this one
// waited is not downloaded again. It reports the bytes in the partial
// file as they grow.
func (s *Store) download(ctx context.Context, client *http.Client, repo name.Repository, d v1.Hash, size int64, report func(done int64), stored func() bool, syncDir bool) (int64, error) {
	f, err := s.lockPartial(ctx, d, stored)
	if err != nil {
		return 0, err
	}
	if f == nil {
		report(size)
		return 0, nil
	}
	defer f.Close() // and so unlocks it
	h := sha256.New()
	have, err := io.Copy(h, f) // the hash of what an earlier attempt wrote
	if err != nil {
		return 0, err
	}
	if have > size {
		return 0, s.discard(d, fmt.Errorf("%w: partial file is longer than the blob", transport.ErrDigestMismatch))
	}
	report(have)
	if have < size {
		u := fmt.Sprintf("%s://%s/v2/%s/blobs/%s", repo.Scheme(), repo.RegistryStr(), repo.RepositoryStr(), d)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return 0, err
		}
		if have > 0 {
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", have, size-1))
			s.log.InfoContext(ctx, "resuming download", logKeyDigest, d.String(), logKeyOffset, have)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		switch {
		case have > 0 && resp.StatusCode == http.StatusOK:
			// The server ignored the Range: start over.
			if err := f.Truncate(0); err != nil {
				return 0, err
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return 0, err
			}
			h.Reset()
			have = 0
			report(0)
		case have > 0 && !startsAt(resp.Header.Get("Content-Range"), have):
			// A 206 from somewhere else than asked: keep nothing of it.
			return 0, fmt.Errorf("resume at byte %d: server answered with range %q", have, resp.Header.Get("Content-Range"))
		case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent:
			return 0, ggcrtransport.CheckError(resp, http.StatusOK, http.StatusPartialContent)
		}
		n, err := copyHashed(f, h, io.LimitReader(resp.Body, size-have), func(n int64) { report(have + n) })
		if err != nil {
			return n, err
		}
		if n < size-have {
			return n, io.ErrUnexpectedEOF
		}
	}
	if got := "sha256:" + fmt.Sprintf("%x", h.Sum(nil)); got != d.String() {
		return 0, s.discard(d, fmt.Errorf("%w: got %s", transport.ErrDigestMismatch, got))
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	return size - have, s.publish(d, syncDir)
}

// lockWait spaces the tries of a blob's lock another downloader holds.
var lockWait = backoff.Exponential{Initial: 10 * time.Millisecond, Max: 500 * time.Millisecond}

// lockPartial opens blob d's partial file (creating it) and takes its
// exclusive flock, which its downloader holds until the blob is in the
// store or the download has stopped: goroutines and processes downloading
// one blob take turns. While another holds it, lockPartial tries again
// (lockWait) until ctx ends. It returns nil (and no error) when the blob
// is in the store by then, as stored tells. A file system without locks downloads
// unlocked, as tend did before.
func (s *Store) lockPartial(ctx context.Context, d v1.Hash, stored func() bool) (*os.File, error) {
	return lockFile(ctx, s.partial(d), stored, s.log, "waiting for another download of the same blob", d)
}

// lockFile opens the lock file p (creating it) and takes its exclusive
// flock, trying again (lockWait) while another holds it, until ctx ends.
// It returns nil (and no error) once done reports the work the lock guards
// is done, by whoever held it. A holder may remove p while it holds it:
// a waiter then opens the new file at p. The lock guards the work on
// blob d; waiting is logged once, with msg.
func lockFile(ctx context.Context, p string, done func() bool, log *slog.Logger, msg string, d v1.Hash) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	for waited := 0; ; {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		for {
			locked, err := tryLock(f)
			if err != nil {
				_ = f.Close()
				return nil, err
			}
			if locked {
				break
			}
			if waited++; waited == 1 {
				log.InfoContext(ctx, msg, logKeyDigest, d.String())
			}
			if err := backoff.Sleep(ctx, lockWait.Delay(waited)); err != nil {
				_ = f.Close()
				return nil, err
			}
		}
		// The holder this one waited for may have finished and removed
		// the file (a blob moved into the store, a digest mismatch, GC):
		// f is then no longer the file at p.
		fi, ferr := f.Stat()
		pi, perr := os.Stat(p)
		current := ferr == nil && perr == nil && os.SameFile(fi, pi)
		if done() {
			if current {
				_ = os.Remove(p) // what this one created, or a stale rest
			}
			_ = f.Close()
			return nil, nil
		}
		if current {
			return f, nil
		}
		_ = f.Close()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// startsAt reports whether a Content-Range header ("bytes 100-199/200")
// starts at offset.
func startsAt(contentRange string, offset int64) bool {
	var start int64
	_, err := fmt.Sscanf(contentRange, "bytes %d-", &start)
	return err == nil && start == offset
}

func (s *Store) discard(d v1.Hash, err error) error {
	_ = os.Remove(s.partial(d))
	return err
}

// tryLock takes f's exclusive flock without waiting, and reports whether
// it did. On a file system without locks it reports true: downloads there
// are not kept apart.
func tryLock(f *os.File) (bool, error) {
	err := flock.Flock(f, flock.Exclusive|flock.NonBlocking)
	switch {
	case err == nil, errors.Is(err, syscall.ENOLCK), errors.Is(err, syscall.EOPNOTSUPP), errors.Is(err, syscall.ENOSYS):
		return true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, nil
	}
	return false, fmt.Errorf("lock %s: %w", f.Name(), err)
}

// publish renames a complete, verified partial file into the store and,
// with syncDir, syncs the folder, so the blob survives a power cut once
// Fetch returns. Its downloader holds the partial file's lock.
func (s *Store) publish(d v1.Hash, syncDir bool) error {
	if !syncDir {
		if err := os.Rename(s.partial(d), s.Path(d)); err != nil {
			return fmt.Errorf("store blob %s: %w", d, err)
		}
		return nil
	}
	if err := atomicfile.Rename(s.partial(d), s.Path(d)); err != nil {
		return fmt.Errorf("store blob %s: %w", d, err)
	}
	return nil
}

// syncBlobs syncs the folder of sha256 blobs, making the blobs renamed
// into it durable.
func (s *Store) syncBlobs() error {
	if err := atomicfile.Sync(s.dir.Stored("sha256")); err != nil {
		return fmt.Errorf("store blobs: %w", err)
	}
	return nil
}

// emptyJSON is the digest of "{}", the blob of the OCI empty descriptor
// (application/vnd.oci.empty.v1+json) that ORAS artifacts have as config.
var emptyJSON = v1.Hash{Algorithm: "sha256", Hex: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}

// Put stores data under digest d after checking that it hashes to d. The
// blob is written atomically (see atomicfile), so it is whole or absent.
// Manifests come this way; layers come with Fetch.
func (s *Store) Put(d v1.Hash, data []byte) error {
	if d.Algorithm != "sha256" {
		return fmt.Errorf("blob %s: only sha256 digests are supported", d)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != d.Hex {
		return fmt.Errorf("store %s: %w: got sha256:%s", d, transport.ErrDigestMismatch, got)
	}
	if s.HasBlob(d) {
		return nil
	}
	if err := atomicfile.Write(filepath.Dir(s.Path(d)), d.Hex, data, 0o444); err != nil {
		return fmt.Errorf("store %s: %w", d, err)
	}
	return nil
}

// read returns the stored blob d, or an error wrapping ErrNotStored.
func (s *Store) read(d v1.Hash, what string) ([]byte, error) {
	b, err := os.ReadFile(s.Path(d))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s %s: %w", what, d, ErrNotStored)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, d, err)
	}
	return b, nil
}
