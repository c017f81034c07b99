package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/oci/transport"
)

// Verify re-hashes blob d in the store, and for a tar layer every file of
// its tree against the tree's record. A blob whose bytes no longer match
// its digest, or a tree with a file that no longer matches its record (a
// hard-linked model file edited in place, a bad disk), is removed, so the
// next Fetch or FetchTree downloads it again, and the error wraps
// transport.ErrDigestMismatch. A blob not in the store is no error.
func (s *Store) Verify(d v1.Hash) error {
	return errors.Join(s.verifyBlob(d), s.verifyTree(d))
}

func (s *Store) verifyBlob(d v1.Hash) error {
	f, err := os.Open(s.Path(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("verify blob %s: %w", d, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.Hex {
		if err := os.Remove(s.Path(d)); err != nil {
			return fmt.Errorf("remove damaged blob %s: %w", d, err)
		}
		return fmt.Errorf("%w: blob %s in the store now hashes to sha256:%s; removed", transport.ErrDigestMismatch, d, got)
	}
	return nil
}

// GC removes every stored blob and tree whose digest ("sha256:<hex>") is
// not in keep, the blob of a layer kept as a complete tree (a crash
// between the two left it), and every partial download or tree being
// built of a blob not in keep that no one is working on (whose lock it
// can take, see lockFile). It returns how many blobs it removed and their
// bytes.
func (s *Store) GC(keep map[string]bool) (int, int64, error) {
	n, freed, err := s.gcTrees(keep)
	errs := []error{err}
	for _, dir := range []string{s.dir.Stored("sha256"), s.dir.Partials()} {
		partial := dir == s.dir.Partials()
		entries, err := os.ReadDir(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			if !partial && keep["sha256:"+e.Name()] && !s.HasTree(v1.Hash{Algorithm: "sha256", Hex: e.Name()}) ||
				partial && keep[statedir.Digest(e.Name())] {
				continue
			}
			info, _ := e.Info()
			if partial {
				if _, err := removePartial(filepath.Join(dir, e.Name())); err != nil {
					errs = append(errs, err)
				}
				continue
			}
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			if info != nil {
				n++
				freed += info.Size()
			}
		}
	}
	return n, freed, errors.Join(errs...)
}

// removePartial removes the partial file at p unless a downloader holds
// its lock: it takes the lock first, without waiting, and removes the file
// only while it is still the one at p. It returns the bytes it removed.
func removePartial(p string) (int64, error) {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	locked, err := tryLock(f)
	if err != nil || !locked {
		return 0, err // !locked: being downloaded
	}
	fi, ferr := f.Stat()
	pi, perr := os.Stat(p)
	if ferr != nil || perr != nil || !os.SameFile(fi, pi) {
		return 0, nil // moved into the store, or removed, meanwhile
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	return fi.Size(), nil
}

// RemovePartial removes the partial download of blob d, unless a download
// holds it (its flock), and returns the bytes it removed: the partial
// file of a download no one will resume.
func (s *Store) RemovePartial(d v1.Hash) (int64, error) {
	n, err := removePartial(s.partial(d))
	if err != nil {
		return 0, fmt.Errorf("remove partial download of %s: %w", d, err)
	}
	return n, nil
}

// gcTrees removes the trees not in keep, and the trees being built (or
// removed), and their locks, that no one works on: all those of a digest
// not in keep or whose tree is complete (a crash left them).
func (s *Store) gcTrees(keep map[string]bool) (int, int64, error) {
	var (
		n     int
		freed int64
		errs  []error
	)
	entries, err := os.ReadDir(s.dir.Trees("sha256"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if keep["sha256:"+e.Name()] {
			continue
		}
		d := v1.Hash{Algorithm: "sha256", Hex: e.Name()}
		size := s.treeSize(d)
		if err := s.removeTree(d); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
		freed += size
	}
	partials, err := os.ReadDir(s.dir.TreePartials())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	seen := map[string]bool{}
	for _, e := range partials {
		p := filepath.Join(s.dir.TreePartials(), e.Name())
		if strings.HasPrefix(e.Name(), trashPrefix) {
			// A tree being removed: whoever removes it holds no lock, and
			// a second removal does no harm.
			errs = append(errs, os.RemoveAll(p))
			continue
		}
		p = strings.TrimSuffix(p, lockSuffix)
		if seen[p] {
			continue
		}
		seen[p] = true
		digest := statedir.Digest(filepath.Base(p))
		if h, err := v1.NewHash(digest); keep[digest] && (err != nil || !s.HasTree(h)) {
			continue // its builder's, or the next one's
		}
		errs = append(errs, removeBuilding(p, p+lockSuffix))
	}
	return n, freed, errors.Join(errs...)
}

const lockSuffix = ".lock"

// removeBuilding removes the tree being built at p unless its builder
// holds its lock (at lock).
func removeBuilding(p, lock string) error {
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	locked, err := tryLock(f)
	if err != nil || !locked {
		return err // !locked: being built
	}
	err = os.RemoveAll(p)
	if rerr := os.Remove(lock); err == nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = rerr
	}
	return err
}
