package oci

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/zstd"

	"github.com/tend-dev/tend/internal/atomicfile"
)

// link hard-links a blob into a version folder; tests swap it to force
// the copy that a link across file systems falls back to.
var link = os.Link

// Materialise builds the version folder dir, which must not exist (its
// parent is made when missing), from blobs already in the store: a file
// entry is hard-linked from its blob (copied when the link fails, across
// file systems for one, or when the entry has a Mode of its own), a tar
// entry is built into its path from its layer's tree (see Unpack; a tar
// layer stored as its blob is unpacked into its tree first), each regular
// file a hard link to the tree's (a copy where the link fails), and a
// ModelKit's config is written as its Kitfile, as kit unpack does (unless
// an include leaves it out, as kit unpack --filter does). Files
// are read-only, as a hard link shares the blob's or the tree's inode. Every file and folder is synced before Materialise
// returns (a hard link's inode was synced with its blob or tree; see
// seal), so a symlink swapped to dir afterwards points at whole content.
// Writes are confined to dir; an entry path that is absolute, has "..",
// is not clean or collides with another is refused with ErrUnsafeArchive.
// A tar layer's symlinks are written as it has them, wherever they point
// (no write goes through one), and its fifos and device nodes are skipped
// (see Build).
// On failure dir is removed.
//
// Unpacking a blob into its tree, the entries made, copying a file (for
// its mode, or a tree's where the link fails) and the Kitfile write at
// most limit bytes (0: no limit), counted as written: past it, it fails
// with an error wrapping ErrTooLarge.
func (s *Store) Materialise(ctx context.Context, a *Artifact, dir string, limit int64) error {
	_, err := s.Build(ctx, a, dir, limit)
	return err
}

// Built is what building a version folder left out of it.
type Built struct {
	// Skipped are the fifos and device nodes of its tar layers, which
	// tend does not write (the rest of the layer is).
	Skipped []Special
}

// Build builds the version folder dir as Materialise does, and says what
// it left out.
func (s *Store) Build(ctx context.Context, a *Artifact, dir string, limit int64) (built Built, err error) {
	if err := checkEntries(a); err != nil {
		return built, err
	}
	var missing []string
	tars := a.tars()
	for _, b := range a.Blobs() {
		if _, tar := tars[b.Digest]; !s.HasBlob(b.Digest) && (!tar || !s.HasTree(b.Digest)) {
			missing = append(missing, b.Digest.String())
		}
	}
	if len(missing) > 0 {
		return built, fmt.Errorf("materialise model %s: %w: %s", a.Digest, ErrNotStored, ShortList(missing, listedItems))
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return built, fmt.Errorf("materialise model %s: %w", a.Digest, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return built, fmt.Errorf("materialise model %s: %w", a.Digest, err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return built, fmt.Errorf("materialise model %s: %w", a.Digest, err)
	}
	defer root.Close()
	var budget *Budget
	if limit > 0 {
		budget = &Budget{Limit: limit}
	}
	// A tar layer stored as its blob (by Put, or by an older tend) is
	// turned into its tree first, counted against the budget.
	raw := a.files()
	for _, e := range a.Entries {
		if e.Unpack && !s.HasTree(e.Digest) {
			if err := s.Unpack(ctx, e, budget, raw[e.Digest]); err != nil {
				return built, fmt.Errorf("materialise model %s: layer %s into %q: %w", a.Digest, e.Digest, "/"+e.Path, err)
			}
		}
	}
	sel := newSelection(a)
	copied := false
	// Files first, while the folder holds no symlink a tar could plant;
	// then tar layers, which refuse to overwrite anything (but an image's
	// layers, which apply over each other in manifest order).
	for _, unpack := range []bool{false, true} {
		for _, e := range a.Entries {
			if e.Unpack != unpack {
				continue
			}
			if err := ctx.Err(); err != nil {
				return built, err
			}
			if unpack {
				var r replayed
				r, err = s.unpack(ctx, root, dir, e, budget, sel.keep(e.Path))
				built.Skipped = append(built.Skipped, r.skipped...)
				copied = copied || r.copied
			} else {
				sel.saw(e.Path)
				err = s.place(root, dir, e, budget)
			}
			if err != nil {
				return built, fmt.Errorf("materialise model %s: layer %s into %q: %w", a.Digest, e.Digest, "/"+e.Path, err)
			}
		}
	}
	if a.isModelKit() && sel.takes(KitfileName) {
		if err := s.writeKitfile(root, a, budget); err != nil {
			return built, fmt.Errorf("materialise model %s: %w", a.Digest, err)
		}
	}
	if err := sel.check(a); err != nil {
		return built, fmt.Errorf("materialise model %s: %w", a.Digest, err)
	}
	if err := seal(root, copied); err != nil {
		return built, fmt.Errorf("materialise model %s: %w", a.Digest, err)
	}
	if err := atomicfile.Sync(filepath.Dir(dir)); err != nil {
		return built, err
	}
	if !copied {
		// Where every file is a link, a tree's file with no other link
		// is in no version: collected (a copy says nothing of links).
		s.collectTrees(ctx, a)
	}
	return built, nil
}

// files returns the digests of a's entries that are files, linked from
// their blob (not tar layers).
func (a *Artifact) files() map[v1.Hash]bool {
	raw := map[v1.Hash]bool{}
	for _, e := range a.Entries {
		if !e.Unpack {
			raw[e.Digest] = true
		}
	}
	return raw
}

// place puts a file entry in the version folder: a hard link to its blob,
// or a synced copy when linking fails or the entry has a mode of its own
// (the blob, shared by every version that links it, keeps 0444). A copy
// for a mode is counted against b.
func (s *Store) place(root *os.Root, dir string, e Entry, b *Budget) error {
	if parent := path.Dir(e.Path); parent != "." {
		if err := root.MkdirAll(parent, 0o755); err != nil {
			return err
		}
	}
	blob := s.Path(e.Digest)
	mode := e.Mode
	if mode == 0 {
		err := link(blob, filepath.Join(dir, filepath.FromSlash(e.Path)))
		if err == nil {
			// A chmod moves the ctime of every link to the blob, which the
			// drift check compares: only when needed.
			if fi, err := os.Stat(blob); err == nil && fi.Mode().Perm() == 0o444 {
				return nil
			}
			return os.Chmod(blob, 0o444)
		}
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		mode = 0o444
	}
	src, err := os.Open(blob)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := root.OpenFile(e.Path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o400)
	if err != nil {
		return err
	}
	if e.Mode != 0 {
		// Only a copy for a mode: one for want of a link lands on another
		// file system than the one whose room b holds.
		err = b.take(e.Size)
	}
	if err == nil {
		_, err = io.Copy(dst, src)
	}
	if err == nil {
		err = dst.Chmod(mode)
	}
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}

// selection tracks what a's include selects while its version folder is
// built: which patterns matched a file, and the files seen.
type selection struct {
	in    includer
	hit   []bool
	files []string
}

func newSelection(a *Artifact) *selection {
	if len(a.include) == 0 {
		return nil
	}
	return &selection{in: includer{patterns: a.include}, hit: make([]bool, len(a.include))}
}

// saw notes file p of the version folder, which Include kept.
func (s *selection) saw(p string) {
	if s == nil {
		return
	}
	s.files = append(s.files, p)
	if i := s.in.match(p); i >= 0 {
		s.hit[i] = true
	}
}

// takes reports whether the include selects file p (noting it, as saw
// does): always without one.
func (s *selection) takes(p string) bool {
	if s == nil {
		return true
	}
	s.saw(p)
	return s.in.match(p) >= 0
}

// keep returns the filter of a tar layer unpacked into folder prefix:
// nil (everything) without an include.
func (s *selection) keep(prefix string) func(name string) bool {
	if s == nil {
		return nil
	}
	return func(name string) bool {
		p := path.Join(prefix, name)
		i := s.in.match(p)
		if len(s.files) < 4*listedItems || i >= 0 {
			s.files = append(s.files, p)
		}
		if i >= 0 {
			s.hit[i] = true
		}
		return i >= 0
	}
}

// check fails when a pattern matched no file: a tar layer held none.
func (s *selection) check(a *Artifact) error {
	if s == nil {
		return nil
	}
	for i, pat := range s.in.patterns {
		if !s.hit[i] {
			slices.Sort(s.files)
			return includeError(a, pat, s.files)
		}
	}
	return nil
}

// unpack builds a tar entry into its path in the version folder from the
// layer's tree, the entries keep selects (nil: all), and says what it
// skipped and whether it copied. A tree whose file no longer matches its
// record is dropped, and so is one that no longer holds a file the
// version needs (collected). It holds the tree's use lock meanwhile.
func (s *Store) unpack(ctx context.Context, root *os.Root, dir string, e Entry, b *Budget, keep func(string) bool) (_ replayed, err error) {
	release, err := s.useTree(e.Digest)
	if err != nil {
		return replayed{}, err
	}
	defer func() {
		release()
		switch {
		case errors.Is(err, ErrDigestMismatch):
			if verr := s.verifyTree(e.Digest); verr != nil {
				err = verr // it is dropped, for the next pull
			}
		case errors.Is(err, ErrNotStored):
			// A file collected from the tree: dropped (unless another
			// version is being built from it), so the layer is
			// downloaded again.
			s.dropCollected(e.Digest)
		}
	}()
	rec, err := s.readTree(e.Digest)
	if err != nil {
		return replayed{}, err
	}
	t := s.tree(e.Digest)
	if e.Path == "" {
		return replay(ctx, t, rec, dir, b, rules{overlay: e.Overlay, keep: keep, model: true}, "")
	}
	if err := root.MkdirAll(e.Path, 0o755); err != nil {
		return replayed{}, err
	}
	// The layer's folder is opened by name: no part of it may be a
	// symlink an earlier layer planted.
	for p := e.Path; p != "."; p = path.Dir(p) {
		fi, err := root.Lstat(p)
		if err != nil {
			return replayed{}, err
		}
		if !fi.IsDir() {
			return replayed{}, fmt.Errorf("%w: %q is not a folder", ErrUnsafeArchive, p)
		}
	}
	return replay(ctx, t, rec, filepath.Join(dir, filepath.FromSlash(e.Path)), b, rules{keep: keep, model: true}, e.Path)
}

// under returns name relative to prefix, if it is inside it.
func under(name, prefix string) (string, bool) {
	clean := path.Clean(name)
	if clean == prefix {
		return ".", true
	}
	rest, ok := strings.CutPrefix(clean, prefix+"/")
	return rest, ok
}

// decompress reads a layer compressed as given.
func decompress(r io.Reader, compression string) (io.Reader, func(), error) {
	switch compression {
	case Gzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip layer: %w", err)
		}
		return zr, func() { zr.Close() }, nil
	case Zstd:
		zr, err := zstd.NewReader(r)
		if err != nil {
			return nil, nil, fmt.Errorf("zstd layer: %w", err)
		}
		return zr, zr.Close, nil
	case Uncompressed:
		return r, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown layer compression %q", compression)
}

// seal makes every file in the version folder read-only and syncs every
// folder, which makes the names in it durable. A regular file is synced
// when copied says a tree's file was copied into the folder (where a link
// failed), or when seal takes its write bits away: any other is a hard
// link sharing the inode of a blob or of a tree's file, synced when it
// was stored, or was synced as it was written (a copy for a mode, the
// Kitfile), and a second fsync of it only costs a journal commit or a
// disk flush per file.
func seal(root *os.Root, copied bool) error {
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			// As the layer has it, wherever it points: tend never
			// follows it (a service that opens it does).
			return nil
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if mode := fi.Mode().Perm(); mode&0o222 != 0 {
				if err := root.Chmod(p, mode&^0o222); err != nil {
					return err
				}
			} else if !copied {
				return nil
			}
		case !d.IsDir():
			return fmt.Errorf("%w: %s is not a file, folder or symlink", ErrUnsafeArchive, p)
		}
		return syncIn(root, p)
	})
}
