package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
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
// is not clean or collides with another is refused with
// extract.ErrUnsafeArchive.
// A tar layer's symlinks are written as it has them, wherever they point
// (no write goes through one), and its fifos and device nodes are skipped
// (see Build).
// On failure dir is removed.
//
// Unpacking a blob into its tree, the entries made, copying a file (for
// its mode, or a tree's where the link fails) and the Kitfile write at
// most limit bytes (0: no limit), counted as written: past it, it fails
// with an error wrapping extract.ErrTooLarge.
func (s *Store) Materialise(ctx context.Context, a *modelkit.Artifact, dir string, limit int64) error {
	_, err := s.Build(ctx, a, dir, limit)
	return err
}

// Built is what building a version folder left out of it.
type Built struct {
	// Skipped are the fifos and device nodes of its tar layers, which
	// tend does not write (the rest of the layer is).
	Skipped []extract.Special
}

// Build builds the version folder dir as Materialise does, and says what
// it left out.
func (s *Store) Build(ctx context.Context, a *modelkit.Artifact, dir string, limit int64) (built Built, err error) {
	if err := modelkit.CheckEntries(a); err != nil {
		return built, err
	}
	var missing []string
	tars := a.Tars()
	for _, b := range a.Blobs() {
		if _, tar := tars[b.Digest]; !s.HasBlob(b.Digest) && (!tar || !s.HasTree(b.Digest)) {
			missing = append(missing, b.Digest.String())
		}
	}
	if len(missing) > 0 {
		return built, fmt.Errorf("materialise model %s: %w: %s", a.Digest, ErrNotStored, printable.ShortList(missing, listedItems))
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
	var budget *extract.Budget
	if limit > 0 {
		budget = &extract.Budget{Limit: limit}
	}
	// A tar layer stored as its blob (by Put, or by an older tend) is
	// turned into its tree first, counted against the budget.
	raw := a.FileBlobs()
	for _, e := range a.Entries {
		if e.Unpack && !s.HasTree(e.Digest) {
			if err := s.Unpack(ctx, e, budget, raw[e.Digest]); err != nil {
				return built, fmt.Errorf("materialise model %s: layer %s into %q: %w", a.Digest, e.Digest, "/"+e.Path, err)
			}
		}
	}
	sel := modelkit.NewSelection(a)
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
				r, err = s.unpack(ctx, root, dir, e, budget, sel.Keep(e.Path))
				built.Skipped = append(built.Skipped, r.skipped...)
				copied = copied || r.copied
			} else {
				sel.Saw(e.Path)
				err = s.place(root, dir, e, budget)
			}
			if err != nil {
				return built, fmt.Errorf("materialise model %s: layer %s into %q: %w", a.Digest, e.Digest, "/"+e.Path, err)
			}
		}
	}
	if a.IsModelKit() && sel.Takes(modelkit.KitfileName) {
		if err := s.writeKitfile(root, a, budget); err != nil {
			return built, fmt.Errorf("materialise model %s: %w", a.Digest, err)
		}
	}
	if err := sel.Check(a); err != nil {
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

// writeKitfile writes ModelKit a's Kitfile into its version folder, as
// kit unpack does (read-only, as everything there), counted against b.
func (s *Store) writeKitfile(root *os.Root, a *modelkit.Artifact, b *extract.Budget) error {
	config, err := s.read(a.Config, "ModelKit config")
	if err != nil {
		return err
	}
	body, err := modelkit.Kitfile(a.Digest, config)
	if err != nil {
		return err
	}
	if err := b.Take(int64(len(body)) + extract.EntryCost); err != nil {
		return err
	}
	f, err := root.OpenFile(modelkit.KitfileName, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("a layer holds a %s of its own where kit unpack writes the ModelKit's: %w", modelkit.KitfileName, err)
	}
	if err != nil {
		return err
	}
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync() // seal syncs no file a link could have made
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// place puts a file entry in the version folder: a hard link to its blob,
// or a synced copy when linking fails or the entry has a mode of its own
// (the blob, shared by every version that links it, keeps 0444). A copy
// for a mode is counted against b.
func (s *Store) place(root *os.Root, dir string, e modelkit.Entry, b *extract.Budget) error {
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
		err = b.Take(e.Size)
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

// unpack builds a tar entry into its path in the version folder from the
// layer's tree, the entries keep selects (nil: all), and says what it
// skipped and whether it copied. A tree whose file no longer matches its
// record is dropped, and so is one that no longer holds a file the
// version needs (collected). It holds the tree's use lock meanwhile.
func (s *Store) unpack(ctx context.Context, root *os.Root, dir string, e modelkit.Entry, b *extract.Budget, keep func(string) bool) (_ replayed, err error) {
	release, err := s.useTree(e.Digest)
	if err != nil {
		return replayed{}, err
	}
	defer func() {
		release()
		switch {
		case errors.Is(err, transport.ErrDigestMismatch):
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
		return replay(ctx, t, rec, dir, b, extract.Rules{Overlay: e.Overlay, Keep: keep, Model: true}, "")
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
			return replayed{}, fmt.Errorf("%w: %q is not a folder", extract.ErrUnsafeArchive, p)
		}
	}
	return replay(ctx, t, rec, filepath.Join(dir, filepath.FromSlash(e.Path)), b, extract.Rules{Keep: keep, Model: true}, e.Path)
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
			return fmt.Errorf("%w: %s is not a file, folder or symlink", extract.ErrUnsafeArchive, p)
		}
		return syncIn(root, p)
	})
}
