package store

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/oci/extract"
	"github.com/tend-dev/tend/oci/transport"
)

// replay builds what the tar layer kept as tree t (whose record is rec)
// unpacks to in dir, which must exist, exactly as the extractor would
// from the tar by rl (a model's version folder: an image's layer when
// Overlay, the entries Keep selects), hard-linking each regular file from
// the tree. With a prefix, every name must start with it, as ORAS tars a
// folder, and lands in dir with the prefix taken off. A regular file its
// record marks collected is not there: one the version needs fails it
// with an error wrapping ErrNotStored.
func replay(ctx context.Context, t statedir.Tree, rec *treeRecord, dir string, b *extract.Budget, rl extract.Rules, prefix string) (replayed, error) {
	var out replayed
	root, err := os.OpenRoot(dir)
	if err != nil {
		return out, err
	}
	defer root.Close()
	l := &linker{dir: dir, b: b}
	x := extract.NewExtractor(root, b, rl, l.file)
	for _, e := range rec.Entries {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("extract: %w", err)
		}
		h := e.header()
		if prefix != "" {
			name, ok := under(h.Name, prefix)
			if !ok || name == "." && h.Typeflag != tar.TypeDir {
				return out, fmt.Errorf("%w: %s: not inside the layer's folder %q", extract.ErrUnsafeArchive, h.Name, prefix)
			}
			h.Name = name
			if h.Typeflag == tar.TypeLink {
				if h.Linkname, ok = under(h.Linkname, prefix); !ok {
					return out, fmt.Errorf("%w: %s: hard link %q leaves the layer's folder %q", extract.ErrUnsafeArchive, h.Name, h.Linkname, prefix)
				}
			}
		}
		l.src, l.srcDigest = "", ""
		if e.regular() {
			l.src, l.srcDigest = t.File(e.File), e.Digest
		}
		l.collected = e.regular() && e.Collected
		if err := x.Entry(nil, h); err != nil {
			return out, err
		}
	}
	skipped := x.Specials()
	for i := range skipped {
		skipped[i].Path = path.Join(prefix, skipped[i].Path)
	}
	return replayed{skipped: skipped, copied: l.copied}, nil
}

// replayed is what a replay did besides its entries.
type replayed struct {
	skipped []extract.Special // special files left out, by their paths in the version folder
	copied  bool              // a regular file was copied from the tree, not linked
}

// linker writes the regular files of a replay into the folder dir from
// the layer's tree: src is the tree's file holding the content of the
// file being extracted, and srcDigest its digest by the tree's record.
// collected: the record says the tree no longer holds it (see
// collectTree).
type linker struct {
	dir            string
	b              *extract.Budget
	src, srcDigest string
	collected      bool
	// copied: a tree's file was copied, where a link failed.
	copied bool
}

// file makes the regular file name a hard link to the tree's file l.src,
// whose mode the tar gave it; where linking fails (across file systems),
// a copy counted against the budget, checked against l.srcDigest (an
// error wrapping transport.ErrDigestMismatch when the tree's file was
// changed), with the modification time the tar gave it.
func (l *linker) file(root *os.Root, name string, h *tar.Header, mode fs.FileMode) error {
	if l.collected {
		return fmt.Errorf("%w: %s: the layer's tree no longer holds it (no version used it when one was built)", ErrNotStored, h.Name)
	}
	err := link(l.src, filepath.Join(l.dir, filepath.FromSlash(name)))
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %s: %w", extract.ErrUnsafeArchive, h.Name, err)
	}
	l.copied = true
	src, err := os.Open(l.src)
	if err != nil {
		return fmt.Errorf("extract %s: %w", h.Name, err)
	}
	defer src.Close()
	f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", extract.ErrUnsafeArchive, h.Name, err)
	}
	sum := sha256.New()
	if _, err := io.Copy(l.b.Writer(io.MultiWriter(f, sum)), src); err != nil {
		f.Close()
		return fmt.Errorf("extract %s: %w", h.Name, err)
	}
	if got := "sha256:" + hex.EncodeToString(sum.Sum(nil)); got != l.srcDigest {
		f.Close()
		return fmt.Errorf("%w: %s: the layer's tree holds content that hashes to %s, not %s as its record says", transport.ErrDigestMismatch, h.Name, got, l.srcDigest)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if h.ModTime.IsZero() { // as the extractor keeps a model's times
		return nil
	}
	return root.Chtimes(name, time.Time{}, h.ModTime)
}
