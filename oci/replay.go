package oci

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

	"github.com/tend-dev/tend/internal/statedir"
)

// replay builds what the tar layer kept as tree t (whose record is rec)
// unpacks to in dir, which must exist, exactly as extract would from the
// tar by rl (a model's version folder: an image's layer when overlay, the
// entries keep selects), hard-linking each regular file from the tree.
// With a prefix, every name must start with it, as ORAS tars a folder, and
// lands in dir with the prefix taken off. A regular file its record marks
// collected is not there: one the version needs fails it with an error
// wrapping ErrNotStored.
func replay(ctx context.Context, t statedir.Tree, rec *treeRecord, dir string, b *Budget, rl rules, prefix string) (replayed, error) {
	var out replayed
	root, err := os.OpenRoot(dir)
	if err != nil {
		return out, err
	}
	defer root.Close()
	x := newExtractor(root, dir, b, rl)
	for _, e := range rec.Entries {
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("extract: %w", err)
		}
		h := e.header()
		if prefix != "" {
			name, ok := under(h.Name, prefix)
			if !ok || name == "." && h.Typeflag != tar.TypeDir {
				return out, fmt.Errorf("%w: %s: not inside the layer's folder %q", ErrUnsafeArchive, h.Name, prefix)
			}
			h.Name = name
			if h.Typeflag == tar.TypeLink {
				if h.Linkname, ok = under(h.Linkname, prefix); !ok {
					return out, fmt.Errorf("%w: %s: hard link %q leaves the layer's folder %q", ErrUnsafeArchive, h.Name, h.Linkname, prefix)
				}
			}
		}
		x.src, x.srcDigest = "", ""
		if e.regular() {
			x.src, x.srcDigest = t.File(e.File), e.Digest
		}
		x.collected = e.regular() && e.Collected
		if err := x.entry(nil, h); err != nil {
			return out, err
		}
	}
	for i := range x.specials {
		x.specials[i].Path = path.Join(prefix, x.specials[i].Path)
	}
	return replayed{skipped: x.specials, copied: x.copied}, nil
}

// replayed is what a replay did besides its entries.
type replayed struct {
	skipped []Special // special files left out, by their paths in the version folder
	copied  bool      // a regular file was copied from the tree, not linked
}

// link makes the regular file name a hard link to the tree's file x.src,
// whose mode the tar gave it; where linking fails (across file systems),
// a copy counted against the budget, checked against x.srcDigest (an
// error wrapping ErrDigestMismatch when the tree's file was changed).
func (x *extractor) link(name string, h *tar.Header, mode fs.FileMode) error {
	err := link(x.src, filepath.Join(x.dir, filepath.FromSlash(name)))
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
	}
	x.copied = true
	src, err := os.Open(x.src)
	if err != nil {
		return fmt.Errorf("extract %s: %w", h.Name, err)
	}
	defer src.Close()
	f, err := x.root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
	}
	sum := sha256.New()
	if _, err := io.Copy(budgetWriter{io.MultiWriter(f, sum), x.b}, src); err != nil {
		f.Close()
		return fmt.Errorf("extract %s: %w", h.Name, err)
	}
	if got := "sha256:" + hex.EncodeToString(sum.Sum(nil)); got != x.srcDigest {
		f.Close()
		return fmt.Errorf("%w: %s: the layer's tree holds content that hashes to %s, not %s as its record says", ErrDigestMismatch, h.Name, got, x.srcDigest)
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return x.keepTime(name, h)
}
