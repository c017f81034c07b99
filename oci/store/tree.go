package store

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
)

// A tar layer is kept in the store as a tree (statedir.Tree) rather than
// as its compressed blob: the content of each of its regular files, and a
// record of every entry in tar order. Version folders hard-link their
// files from the tree, so a layer takes its unpacked size on disk once,
// however many versions use it.
//
// The tree holds the tar as it is, names unchecked: what the names mean
// (a folder's prefix, an image layer's whiteouts, a model's include) is
// the version's business, and Materialise reads the record through the
// same confined extractor a tar goes through, refusing what it refuses.
// The tree itself holds regular files only, each named by its place in
// the record, so nothing in it is a link or a name from the tar.

// treeRecord is a tree's record: every entry of the tar, in order.
type treeRecord struct {
	Digest  string      `json:"digest"`
	Entries []treeEntry `json:"entries"`
}

// Types of a treeEntry.
const (
	treeFile     = "file"
	treeDir      = "dir"
	treeSymlink  = "symlink"
	treeHardlink = "hardlink"
	treeWhiteout = "whiteout" // a regular file named .wh.NAME: a whiteout in an image's layer
	treeOpaque   = "opaque"   // a regular file named .wh..wh..opq
	treeOther    = "other"    // a device node, a fifo…: refused when a version needs it
)

// treeEntry is one entry of a tar.
type treeEntry struct {
	Name     string `json:"name"` // as the tar has it
	Type     string `json:"type"`
	Typeflag string `json:"typeflag,omitempty"` // of an "other" entry
	Mode     int64  `json:"mode"`               // as the tar has it
	Size     int64  `json:"size,omitempty"`
	Digest   string `json:"digest,omitempty"` // of a regular file's content
	File     string `json:"file,omitempty"`   // a regular file's content in the tree's Files
	Target   string `json:"target,omitempty"` // of a link
	// Collected: no version linked the file, and it was removed (see
	// collectTree).
	Collected bool `json:"collected,omitempty"`
	// Mtime is a regular file's modification time as the tar has it,
	// which its file in the tree keeps (zero in a tree built before).
	Mtime time.Time `json:"mtime,omitzero"`
}

// regular reports whether the entry has content in the tree.
func (e treeEntry) regular() bool {
	return e.Type == treeFile || e.Type == treeWhiteout || e.Type == treeOpaque
}

// header is the entry as the tar had it, its content aside.
func (e treeEntry) header() *tar.Header {
	h := &tar.Header{Name: e.Name, Mode: e.Mode, Size: e.Size, Linkname: e.Target, ModTime: e.Mtime}
	switch e.Type {
	case treeDir:
		h.Typeflag = tar.TypeDir
	case treeSymlink:
		h.Typeflag = tar.TypeSymlink
	case treeHardlink:
		h.Typeflag = tar.TypeLink
	case treeOther:
		h.Typeflag = tar.TypeChar
		if e.Typeflag != "" {
			h.Typeflag = e.Typeflag[0]
		}
	default:
		h.Typeflag = tar.TypeReg
	}
	return h
}

// treeMode is the mode of a tree's file: the tar's permission bits, read
// only (a version folder's file shares the inode).
func treeMode(mode int64) fs.FileMode { return fs.FileMode(mode).Perm() &^ 0o222 }

func (s *Store) tree(d v1.Hash) statedir.Tree { return s.dir.Tree(d.Algorithm, d.Hex) }

// HasTree reports whether tar layer d is kept as a complete tree.
func (s *Store) HasTree(d v1.Hash) bool {
	_, err := os.Stat(s.tree(d).Record())
	return err == nil
}

// HasBlob reports whether blob d is stored as a blob (not as a tree).
func (s *Store) HasBlob(d v1.Hash) bool {
	_, err := os.Stat(s.Path(d))
	return err == nil
}

// readTree reads the record of tree d.
func (s *Store) readTree(d v1.Hash) (*treeRecord, error) {
	var rec treeRecord
	found, err := statedir.ReadJSON(s.tree(d).Record(), &rec)
	if err != nil {
		return nil, fmt.Errorf("tree of layer %s: %w", d, err)
	}
	if !found {
		return nil, fmt.Errorf("tree of layer %s: %w", d, ErrNotStored)
	}
	return &rec, nil
}

// FetchTree brings tar layer e into the store as a tree: its blob is
// downloaded as Fetch does (unless the blob or the tree is there), then
// unpacked (see Unpack). keepBlob keeps the blob too, for an artifact
// that also links it as a file. It returns the bytes downloaded.
func (s *Store) FetchTree(ctx context.Context, repo name.Repository, e modelkit.Entry, b *extract.Budget, keepBlob bool, opts transport.Options) (int64, error) {
	if s.HasTree(e.Digest) {
		if opts.Progress != nil {
			opts.Progress.Blob(e.Digest, e.Size, e.Size)
		}
		if !keepBlob {
			s.dropBlob(e.Digest)
		}
		return 0, nil
	}
	var n int64
	for try := 0; ; try++ {
		got, err := s.fetch(ctx, repo, e.Digest, e.Size, opts, func() bool { return s.Has(e.Digest) }, true)
		n += got
		if err != nil {
			return n, err
		}
		if afterFetch != nil {
			afterFetch(e.Digest)
		}
		err = s.Unpack(ctx, e, b, keepBlob)
		if try == 0 && errors.Is(err, ErrNotStored) {
			// Removed between its download and its unpacking by the
			// garbage collection of another tend on the stateDir (tend
			// apply --stage-only downloads beside an agent's ticks):
			// downloaded once more.
			continue
		}
		return n, err
	}
}

// afterFetch, when set (by tests), runs between a layer's download and
// its unpacking in FetchTree.
var afterFetch func(v1.Hash)

// dropBlob removes the blob of a layer kept as a tree: a crash after the
// tree was stored may have left it.
func (s *Store) dropBlob(d v1.Hash) {
	if err := os.Remove(s.Path(d)); err == nil {
		_ = atomicfile.Sync(filepath.Dir(s.Path(d)))
	}
}

// Unpack turns the stored blob of tar layer e into its tree, unless the
// tree is complete already: it reads the tar (decompressed as e says)
// into a tree being built (statedir.Blobs.TreePartial), counting what it
// writes against b (nil: no bound) and checking ctx between entries,
// writes and syncs the record, renames the tree into place, and only then
// removes the blob (unless keepBlob). A crash at any point leaves the
// blob or the complete tree. Unpackers of one layer, in this process or
// another on the same stateDir, take turns (the tree's lock). A tar that
// cannot be read, or that writes past b, leaves the blob as it was; the
// error wraps extract.ErrTooLarge for the latter.
func (s *Store) Unpack(ctx context.Context, e modelkit.Entry, b *extract.Budget, keepBlob bool) error {
	d := e.Digest
	lock, err := lockFile(ctx, s.dir.TreeLock(d.Algorithm, d.Hex), func() bool { return s.HasTree(d) }, s.log, "waiting for another unpacking of the same layer", d)
	if err != nil {
		return fmt.Errorf("unpack layer %s: %w", d, err)
	}
	if lock == nil {
		if !keepBlob {
			s.dropBlob(d)
		}
		return nil
	}
	defer func() {
		// Others waiting for the lock find the tree, or build it.
		_ = os.Remove(lock.Name())
		_ = lock.Close()
	}()
	f, err := os.Open(s.Path(d))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unpack layer %s: %w", d, ErrNotStored)
	}
	if err != nil {
		return fmt.Errorf("unpack layer %s: %w", d, err)
	}
	defer f.Close()
	tmp := s.dir.TreePartial(d.Algorithm, d.Hex)
	if err := os.RemoveAll(string(tmp)); err != nil { // what a crash left
		return fmt.Errorf("unpack layer %s: %w", d, err)
	}
	if err := s.buildTree(ctx, f, e.Compression, d, tmp, b); err != nil {
		_ = os.RemoveAll(string(tmp))
		return fmt.Errorf("unpack layer %s: %w", d, err)
	}
	failpoint.Hit("tree:built")
	to := s.tree(d)
	if err := os.MkdirAll(filepath.Dir(string(to)), 0o755); err != nil {
		return fmt.Errorf("unpack layer %s: %w", d, err)
	}
	if err := os.RemoveAll(string(to)); err != nil { // an incomplete tree (no record)
		return fmt.Errorf("unpack layer %s: %w", d, err)
	}
	if err := atomicfile.Rename(string(tmp), string(to)); err != nil {
		return fmt.Errorf("unpack layer %s: %w", d, err)
	}
	failpoint.Hit("tree:stored")
	if !keepBlob {
		s.dropBlob(d)
	}
	return nil
}

// buildTree reads tar r into the tree at t, which it creates.
func (s *Store) buildTree(ctx context.Context, r io.Reader, compression string, d v1.Hash, t statedir.Tree, b *extract.Budget) error {
	if err := os.MkdirAll(t.Files(), 0o755); err != nil {
		return err
	}
	dr, closeDecompressor, err := extract.Decompress(r, compression)
	if err != nil {
		return err
	}
	defer closeDecompressor()
	files, err := os.OpenRoot(t.Files())
	if err != nil {
		return err
	}
	defer files.Close()
	rec := treeRecord{Digest: d.String()}
	tr := tar.NewReader(dr)
	h := sha256.New()
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("extract: %w", err)
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // pax metadata for the whole archive, not a file
		}
		if len(rec.Entries) >= maxTreeEntries {
			return fmt.Errorf("%w: more than %d entries", extract.ErrTooLarge, maxTreeEntries)
		}
		if err := b.Take(extract.EntryCost); err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, err)
		}
		e := treeEntry{Name: hdr.Name, Mode: hdr.Mode & 0o7777}
		switch hdr.Typeflag {
		case tar.TypeReg:
			e.Type = treeFile
			switch base := hdr.Name[strings.LastIndex(hdr.Name, "/")+1:]; {
			case base == extract.WhiteoutOpaque:
				e.Type = treeOpaque
			case strings.HasPrefix(base, extract.WhiteoutPrefix):
				e.Type = treeWhiteout
			}
			e.File = strconv.Itoa(len(rec.Entries))
			h.Reset()
			if e.Size, err = writeTreeFile(files, e.File, treeMode(e.Mode), tr, h, b); err != nil {
				return fmt.Errorf("extract %s: %w", hdr.Name, err)
			}
			if !hdr.ModTime.IsZero() {
				// Kept as tar -x keeps it: every version linking the file
				// shares this inode, and this layer's time.
				e.Mtime = hdr.ModTime.UTC()
				if err := files.Chtimes(e.File, time.Time{}, e.Mtime); err != nil {
					return fmt.Errorf("extract %s: %w", hdr.Name, err)
				}
			}
			e.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
		case tar.TypeDir:
			e.Type = treeDir
		case tar.TypeSymlink:
			e.Type, e.Target = treeSymlink, hdr.Linkname
		case tar.TypeLink:
			e.Type, e.Target = treeHardlink, hdr.Linkname
		default:
			e.Type, e.Typeflag = treeOther, string(hdr.Typeflag)
		}
		rec.Entries = append(rec.Entries, e)
	}
	// The files are synced once the tar is read whole: a layer refused
	// half way (past its budget) costs no sync, and a sync finds the
	// files written together.
	for _, e := range rec.Entries {
		if e.regular() {
			if err := syncIn(files, e.File); err != nil {
				return err
			}
		}
	}
	if err := atomicfile.Sync(t.Files()); err != nil {
		return err
	}
	return statedir.WriteJSON(string(t), statedir.TreeRecordFile, rec, 0o444)
}

// maxTreeEntries bounds the entries of one tar layer, whatever its budget:
// its record is read whole.
const maxTreeEntries = 4_000_000

// writeTreeFile writes r to the new file name in files with mode, hashing
// it into h and counting it against b.
func writeTreeFile(files *os.Root, name string, mode fs.FileMode, r io.Reader, h hash.Hash, b *extract.Budget) (int64, error) {
	f, err := files.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(b.Writer(io.MultiWriter(f, h)), r)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// syncIn syncs the file name in r.
func syncIn(r *os.Root, name string) error {
	f, err := r.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// verifyTree re-hashes every file of tree d against its record. A tree
// whose file was changed (a hard-linked model file edited in place, a bad
// disk), or that lost one, is dropped, so the next FetchTree downloads the
// layer again; the error wraps transport.ErrDigestMismatch and names the
// file.
func (s *Store) verifyTree(d v1.Hash) error {
	rec, err := s.readTree(d)
	if errors.Is(err, ErrNotStored) {
		return nil
	}
	if errors.Is(err, atomicfile.ErrCorrupt) {
		return s.dropTree(d, err)
	}
	if err != nil {
		return err
	}
	t := s.tree(d)
	for _, e := range rec.Entries {
		if !e.regular() || e.Collected {
			continue
		}
		why, err := checkTreeFile(t.File(e.File), e)
		if err != nil {
			return fmt.Errorf("verify tree of layer %s: %w", d, err)
		}
		if why != "" {
			return s.dropTree(d, fmt.Errorf("%w: tree of layer %s: %s (%s) %s", transport.ErrDigestMismatch, d, e.Name, t.File(e.File), why))
		}
	}
	return nil
}

// checkTreeFile says how the tree file at p differs from e ("" when it
// does not).
func checkTreeFile(p string, e treeEntry) (string, error) {
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "is missing", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	switch {
	case !fi.Mode().IsRegular():
		return "is not a regular file", nil
	case fi.Mode().Perm() != treeMode(e.Mode):
		return fmt.Sprintf("has mode %04o, not %04o", fi.Mode().Perm(), treeMode(e.Mode)), nil
	case fi.Size() != e.Size:
		return fmt.Sprintf("has %d bytes, not %d", fi.Size(), e.Size), nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != e.Digest {
		return "now hashes to " + got, nil
	}
	return "", nil
}

// dropTree removes tree d, renamed aside first so that it is complete or
// gone, and returns cause with what was done.
func (s *Store) dropTree(d v1.Hash, cause error) error {
	if err := s.removeTree(d); err != nil {
		return fmt.Errorf("%w; removing it: %w", cause, err)
	}
	return fmt.Errorf("%w; removed", cause)
}

// removeTree removes tree d: it is renamed into the trees being built
// first, under a name of its own, so a crash leaves it whole or gone.
func (s *Store) removeTree(d v1.Hash) error {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	trash := filepath.Join(s.dir.TreePartials(), trashPrefix+d.Hex+"-"+hex.EncodeToString(suffix[:]))
	if err := os.MkdirAll(s.dir.TreePartials(), 0o755); err != nil {
		return err
	}
	if err := os.Rename(string(s.tree(d)), trash); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	_ = atomicfile.Sync(filepath.Dir(string(s.tree(d))))
	return os.RemoveAll(trash)
}

// trashPrefix starts the name of a tree being removed.
const trashPrefix = ".removed-"

// TreeFiles returns the files of the trees of a's tar layers, by path,
// with the digest their record gives each: a version folder's file that
// is a hard link to one of them has that content, unless the tree was
// changed in place (which Verify finds). A layer not kept as a tree has
// none.
func (s *Store) TreeFiles(a *modelkit.Artifact) map[string]string {
	out := map[string]string{}
	for d := range a.Tars() {
		rec, err := s.readTree(d)
		if err != nil {
			continue
		}
		t := s.tree(d)
		for _, e := range rec.Entries {
			if e.regular() && !e.Collected {
				out[t.File(e.File)] = e.Digest
			}
		}
	}
	return out
}

// treeSize is what tree d's files take, by their record.
func (s *Store) treeSize(d v1.Hash) int64 {
	rec, err := s.readTree(d)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range rec.Entries {
		if !e.Collected {
			n += e.Size
		}
	}
	return n
}
