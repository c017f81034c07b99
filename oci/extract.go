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

// ErrTooLarge means unpacking a layer wrote more than its budget: more
// than the room the node has for it (a decompression bomb, or a layer that
// does not fit).
var ErrTooLarge = errors.New("unpacks to more than the room for it")

// Budget bounds the bytes extraction writes, counted as they are written,
// and entryCost for every entry it creates (a folder, an empty file, a
// link take a block and an inode), so that a small layer of millions of
// empty entries cannot exhaust the file system either. A nil Budget is no
// bound.
type Budget struct {
	Limit   int64
	Written int64
}

// entryCost is what one entry costs the budget besides its content.
const entryCost = 4096

// take counts n more bytes, or fails once the budget is spent.
func (b *Budget) take(n int64) error {
	if b == nil {
		return nil
	}
	b.Written += n
	if b.Written > b.Limit {
		return fmt.Errorf("%w: more than %s written", ErrTooLarge, HumanBytes(b.Limit))
	}
	return nil
}

// budgetWriter is a file written under a budget.
type budgetWriter struct {
	w io.Writer
	b *Budget
}

func (w budgetWriter) Write(p []byte) (int, error) {
	if err := w.b.take(int64(len(p))); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}

// Compression of a tar layer.
const (
	Uncompressed = ""
	Gzip         = "gzip"
	Zstd         = "zstd"
)

// Extract unpacks a tar stream (compressed as given) into dir, which must
// exist. It is confined: names with "..", absolute names, device nodes,
// fifos, links that could point out of dir and entries whose parent is a
// symlink planted by an earlier entry are refused, and all writes go
// through an os.Root at dir, so no entry and no symlink planted by an
// earlier entry can reach outside it. Modes keep only permission bits, and
// a file or folder is writable by its owner alone. What files take is counted
// against b (nil: no bound), so a layer cannot write more than the room
// it was given.
func Extract(r io.Reader, compression, dir string, b *Budget) error {
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
		if err := extractEntry(root, tr, h, b); err != nil {
			return err
		}
	}
}

func extractEntry(root *os.Root, tr *tar.Reader, h *tar.Header, b *Budget) error {
	if h.Typeflag == tar.TypeXGlobalHeader {
		return nil // pax metadata for the whole archive (git archive writes one), not a file
	}
	name, err := entryName(h.Name)
	if err != nil {
		return err
	}
	if name == "." {
		return nil
	}
	if err := b.take(entryCost); err != nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	if err := realParents(root, name, kinds[h.Typeflag]); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
	}
	// Permission bits only (no setuid, setgid or sticky), and no group or
	// other write: nobody but tend may change what a version holds.
	mode := fs.FileMode(h.Mode).Perm() &^ 0o022
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
			return fmt.Errorf("%w: %s: folder entry over an earlier %s", ErrUnsafeArchive, h.Name, fi.Mode().Type())
		}
		if err := root.MkdirAll(name, 0o755); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
		}
		// A 1777 folder in the tar is 0755 here.
		return root.Chmod(name, mode|0o700)
	case tar.TypeReg:
		f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
		}
		if _, err := io.Copy(budgetWriter{f, b}, tr); err != nil {
			f.Close()
			return fmt.Errorf("extract %s: %w", h.Name, err)
		}
		if err := f.Chmod(mode); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	case tar.TypeSymlink:
		if err := confinedLink(name, h.Linkname); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
		}
		return root.Symlink(h.Linkname, name)
	case tar.TypeLink:
		target, err := entryName(h.Linkname)
		if err != nil {
			return fmt.Errorf("%w: %s: hard link %q leaves the folder", ErrUnsafeArchive, h.Name, h.Linkname)
		}
		// A hard link to a symlink is a second symlink with the same
		// target, read from another folder: "sub/l -> .." stays inside,
		// a copy at "l" would not. Only regular files are linked.
		fi, err := root.Lstat(target)
		if err != nil {
			return fmt.Errorf("%w: %s: hard link to %q: %w", ErrUnsafeArchive, h.Name, h.Linkname, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %s: hard link to %q, a %s, not a regular file", ErrUnsafeArchive, h.Name, h.Linkname, fi.Mode().Type())
		}
		return root.Link(target, name)
	}
	return fmt.Errorf("%w: %s: entries of type %q (device nodes, fifos…) are not extracted", ErrUnsafeArchive, h.Name, string(h.Typeflag))
}

// realParents refuses a name whose parent folders, as already on disk,
// include a symlink (planted by an earlier entry). Following it would land
// the entry somewhere its name does not say, so a link target checked
// against the name could point out of the folder ("d/b -> ..", then
// "d/b/e -> .." lands as "e -> .."). Every entry therefore sits under real
// folders only, which confinedLink relies on. kind names the entry in the
// error ("symlink", "file").
func realParents(root *os.Root, name, kind string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	p := ""
	for _, c := range strings.Split(dir, "/") {
		p = path.Join(p, c)
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // MkdirAll creates the rest as real folders
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := root.Readlink(p)
			if err != nil {
				return err
			}
			if kind == "" {
				kind = "entry"
			}
			// Where it would land, read lexically: good enough to say.
			landing := path.Join(path.Dir(p), target, strings.TrimPrefix(name, p+"/"))
			return fmt.Errorf("parent %q is a symlink to %q, so this would plant %s %s; entries are not extracted through links, pack the archive without them", p, target, kind, landing)
		}
		if !fi.IsDir() {
			return fmt.Errorf("parent %q is not a folder", p)
		}
	}
	return nil
}

// kinds names entry types in errors.
var kinds = map[byte]string{
	tar.TypeDir:     "folder",
	tar.TypeReg:     "file",
	tar.TypeSymlink: "symlink",
	tar.TypeLink:    "hard link",
}

// confinedLink checks the target of a symlink at name (whose parents are
// real folders) stays inside the folder wherever it resolves: it is
// relative, climbs only at its start ("../../x/y") and no higher than
// name's own depth. A ".." after a name ("a/../..") is refused rather than
// cleaned lexically, as the kernel resolves it after following a, which may
// itself be a link.
func confinedLink(name, target string) error {
	if target == "" {
		return errors.New("symlink with an empty target")
	}
	if path.IsAbs(target) || strings.HasPrefix(target, "\\") {
		return fmt.Errorf("symlink to absolute path %q", target)
	}
	depth := 0
	if dir := path.Dir(name); dir != "." {
		depth = strings.Count(dir, "/") + 1
	}
	climbs, named := 0, false
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				return fmt.Errorf("symlink %q climbs after a name; write it without \"..\" in the middle", target)
			}
			if climbs++; climbs > depth {
				return fmt.Errorf("symlink %q leaves the folder", target)
			}
		default:
			named = true
		}
	}
	return nil
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
