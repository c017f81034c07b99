package oci

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// ErrUnsafeArchive means a layer's tar holds an entry that would land
// outside its folder or is not a plain file, folder or confined link.
var ErrUnsafeArchive = errors.New("unsafe archive entry")

// Compression of a tar layer.
const (
	Uncompressed = ""
	Gzip         = "gzip"
	Zstd         = "zstd"
)

// Extract unpacks a tar stream (compressed as given) into dir, which must
// exist. It is confined: names with "..", absolute names, device nodes,
// fifos and links that point out of dir are refused, and all writes go
// through an os.Root at dir, so no entry and no symlink planted by an
// earlier entry can reach outside it. Modes keep only permission bits.
func Extract(r io.Reader, compression, dir string) error {
	switch compression {
	case Gzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return fmt.Errorf("gzip layer: %w", err)
		}
		defer zr.Close()
		r = zr
	case Zstd:
		zr, err := zstd.NewReader(r)
		if err != nil {
			return fmt.Errorf("zstd layer: %w", err)
		}
		defer zr.Close()
		r = zr
	case Uncompressed:
	default:
		return fmt.Errorf("unknown layer compression %q", compression)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if err := extractEntry(root, tr, h); err != nil {
			return err
		}
	}
}

func extractEntry(root *os.Root, tr *tar.Reader, h *tar.Header) error {
	name, err := entryName(h.Name)
	if err != nil || name == "." {
		if name == "." && err == nil {
			return nil
		}
		return err
	}
	mode := fs.FileMode(h.Mode).Perm()
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, 0o755); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
		}
		return root.Chmod(name, mode|0o700)
	case tar.TypeReg:
		f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return fmt.Errorf("extract %s: %w", h.Name, err)
		}
		if err := f.Chmod(mode); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	case tar.TypeSymlink:
		// The link's target, resolved from where the link sits, must stay
		// inside the folder; os.Root refuses to follow it out anyway.
		target := h.Linkname
		if path.IsAbs(target) {
			return fmt.Errorf("%w: %s: symlink to absolute path %q", ErrUnsafeArchive, h.Name, target)
		}
		if _, err := entryName(path.Join(path.Dir(name), target)); err != nil {
			return fmt.Errorf("%w: %s: symlink %q leaves the folder", ErrUnsafeArchive, h.Name, target)
		}
		return root.Symlink(target, name)
	case tar.TypeLink:
		target, err := entryName(h.Linkname)
		if err != nil {
			return fmt.Errorf("%w: %s: hard link %q leaves the folder", ErrUnsafeArchive, h.Name, h.Linkname)
		}
		return root.Link(target, name)
	}
	return fmt.Errorf("%w: %s: entries of type %q (device nodes, fifos…) are not extracted", ErrUnsafeArchive, h.Name, string(h.Typeflag))
}

// entryName cleans a tar entry name and refuses one that is absolute or
// climbs out with "..".
func entryName(n string) (string, error) {
	if path.IsAbs(n) || strings.HasPrefix(n, "\\") {
		return "", fmt.Errorf("%w: %q is absolute", ErrUnsafeArchive, n)
	}
	clean := path.Clean(n)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %q climbs out of the folder", ErrUnsafeArchive, n)
	}
	return clean, nil
}
