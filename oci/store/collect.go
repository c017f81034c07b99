package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/flock"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/oci/modelkit"
)

// A tree keeps every regular file of its tar, but a version folder links
// only those it shows: a file a later layer deletes (a whiteout) or
// replaces, or that an include leaves out, is linked by no version. Once
// a version is built, such a file, whose inode has no link but the tree's,
// is collected: its record entry is marked collected (written first, so
// a crash leaves at worst a marked file, removed the next time) and the
// file removed. A version built later that needs it finds the tree
// incomplete: the tree is dropped and the layer downloaded again.
//
// A version being built holds a shared flock on each tree's files folder
// while it links from it (useTree); collecting takes it exclusively
// without waiting, and leaves a tree in use to the next build.

// useTree takes the shared use lock of tree d, and returns its release.
func (s *Store) useTree(d v1.Hash) (func(), error) {
	f, err := os.Open(s.tree(d).Files())
	if errors.Is(err, fs.ErrNotExist) {
		return func() {}, nil // readTree says what is missing
	}
	if err != nil {
		return nil, err
	}
	if err := flock.Flock(f, flock.Shared); err != nil && !lockless(err) {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}

// lockless reports whether err says the file system has no locks.
func lockless(err error) bool {
	return errors.Is(err, syscall.ENOLCK) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS)
}

// collectTrees collects the files no version links from the trees of a's
// tar layers. It fails nothing: what it cannot collect stays, logged.
func (s *Store) collectTrees(ctx context.Context, a *modelkit.Artifact) {
	var freed int64
	for d := range a.Tars() {
		n, err := s.collectTree(d)
		freed += n
		if err != nil {
			s.log.WarnContext(ctx, "collecting the files no version uses from a layer's tree", logKeyDigest, d.String(), logKeyError, err.Error())
		}
	}
	if freed > 0 {
		s.log.InfoContext(ctx, "files no version uses collected from layers' trees", "bytes", freed)
	}
}

// collectTree collects the files of tree d no version links, unless a
// version is being built from it, and returns their bytes.
func (s *Store) collectTree(d v1.Hash) (int64, error) {
	t := s.tree(d)
	f, err := os.Open(t.Files())
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if ok, err := tryLock(f); err != nil || !ok {
		return 0, err
	}
	rec, err := s.readTree(d)
	if err != nil {
		return 0, err
	}
	var gone []string
	var freed int64
	marked := false
	for i, e := range rec.Entries {
		if !e.regular() {
			continue
		}
		fi, err := os.Lstat(t.File(e.File))
		if err != nil {
			continue // collected already, or lost (Verify drops the tree)
		}
		if !e.Collected && links(fi) != 1 {
			continue
		}
		if !e.Collected {
			rec.Entries[i].Collected, marked = true, true
			freed += e.Size
		}
		gone = append(gone, t.File(e.File))
	}
	if marked {
		if err := statedir.WriteJSON(string(t), statedir.TreeRecordFile, rec, 0o444); err != nil {
			return 0, err
		}
	}
	var errs []error
	for _, p := range gone {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(gone) > 0 {
		errs = append(errs, atomicfile.Sync(t.Files()))
	}
	return freed, errors.Join(errs...)
}

// dropCollected removes tree d, which lacks a file a version needs, so
// that the layer is downloaded again; not while a version is being built
// from it (the next build drops it).
func (s *Store) dropCollected(d v1.Hash) {
	f, err := os.Open(s.tree(d).Files())
	if err != nil {
		return
	}
	ok, err := tryLock(f)
	if err == nil && ok {
		err = s.removeTree(d) // the lock goes with the folder
	}
	_ = f.Close()
	if err != nil {
		s.log.Warn("dropping a layer's tree that no longer holds a file a version needs", logKeyDigest, d.String(), logKeyError, err.Error())
	}
}
