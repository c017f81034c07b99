package extract

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/klauspost/compress/zstd"
)

// ErrUnsafeArchive means a layer's tar holds an entry that would land
// outside its folder or is not a plain file, folder or confined link.
var ErrUnsafeArchive = errors.New("unsafe archive entry")

// Bounds of one entry's name, checked before anything is made for it: a
// deep path costs a walk per folder, and the kernel refuses longer ones
// anyway (PATH_MAX, NAME_MAX).
const (
	maxNameBytes = 4096
	maxNameParts = 128
	maxPartBytes = 255
)

// Compression of a tar layer.
const (
	Uncompressed = ""
	Gzip         = "gzip"
	Zstd         = "zstd"
)

// Extract unpacks a tar stream (compressed as given) into dir, which must
// exist (a fleet artifact's files). It is confined: names with "..",
// absolute names, device nodes, fifos, links that could point out of dir
// and entries whose parent is a symlink planted by an earlier entry are
// refused, and all writes go
// through an os.Root at dir, so no entry and no symlink planted by an
// earlier entry can reach outside it. Modes keep only permission bits, and
// a file or folder is writable by its owner alone. What files take is counted
// against b (nil: no bound), so a layer cannot write more than the room
// it was given.
func Extract(ctx context.Context, r io.Reader, compression, dir string, b *Budget) error {
	_, err := Rules{}.Extract(ctx, r, compression, dir, b)
	return err
}

// ExtractLayer unpacks a layer of an image into dir, over the layers
// below it, as Extract does (confined alike), with the OCI image layer
// spec's semantics: an entry replaces what is at its name (a file, a
// link, or a folder and all it holds), a whiteout ".wh.NAME" deletes
// NAME, and an opaque whiteout ".wh..wh..opq" deletes what its folder
// held; neither is written, and neither deletes what this layer wrote.
func ExtractLayer(ctx context.Context, r io.Reader, compression, dir string, b *Budget) error {
	_, err := Rules{Overlay: true}.Extract(ctx, r, compression, dir, b)
	return err
}

// Decompress reads a layer compressed as given (Uncompressed, Gzip or
// Zstd); the function it returns closes the decompressor.
func Decompress(r io.Reader, compression string) (io.Reader, func(), error) {
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

// Rules say how a tar is unpacked beyond what every tar shares.
type Rules struct {
	// Overlay unpacks an image's layer (see ExtractLayer).
	Overlay bool
	// Keep, when not nil, selects the entries written by their clean
	// name (a model's include): the others are read past, but for an
	// image layer's whiteouts, which still delete.
	Keep func(name string) bool
	// Model unpacks into a model's version folder: a symlink is written
	// as the tar has it, wherever it points (tend never follows one, and
	// no entry is written through one), and a fifo or device node is
	// skipped and named in what Extract returns, as tar -x keeps the
	// rest. Without it (a fleet artifact) both are refused.
	Model bool
}

// Whiteouts of the OCI image layer spec.
const (
	WhiteoutPrefix = ".wh."
	WhiteoutOpaque = ".wh..wh..opq"
)

// Extract unpacks as the function Extract does, by rl; it returns the
// special files a model's rules skipped.
func (rl Rules) Extract(ctx context.Context, r io.Reader, compression, dir string, b *Budget) ([]Special, error) {
	switch compression {
	case Gzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("gzip layer: %w", err)
		}
		defer zr.Close()
		r = zr
	case Zstd:
		zr, err := zstd.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("zstd layer: %w", err)
		}
		defer zr.Close()
		r = zr
	case Uncompressed:
	default:
		return nil, fmt.Errorf("unknown layer compression %q", compression)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	x := NewExtractor(root, b, rl, nil)
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("extract: %w", err)
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return x.specials, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read tar: %w", err)
		}
		if err := x.Entry(tr, h); err != nil {
			return nil, err
		}
	}
}

// A FileWriter writes the regular file name (a slash path in root) of
// entry h, with mode, in place of the tar's content: the extractor has
// checked h and made the folders above name. Like the extractor's own
// writes, it must not replace what an earlier entry left at name.
type FileWriter func(root *os.Root, name string, h *tar.Header, mode fs.FileMode) error

// NewExtractor returns an extractor of the entries of one tar into root,
// by rl, counting what it writes against b (nil: no bound). With file,
// it writes no regular file's content itself, and has file write each
// one (a layer kept as a tree in the store links the tree's copy).
func NewExtractor(root *os.Root, b *Budget, rl Rules, file FileWriter) *Extractor {
	x := &Extractor{root: root, b: b, file: file, folders: map[string]bool{}, keep: rl.Keep, model: rl.Model}
	if rl.Overlay {
		x.written = map[string]bool{}
	}
	return x
}

// Extractor unpacks the entries of one tar into a folder, one at a time,
// confined as Extract says: from the tar itself, or from a copy of the
// tar's entries kept elsewhere, which writes its regular files itself (a
// layer's tree in the store).
type Extractor struct {
	root *os.Root
	b    *Budget
	// file, when not nil, writes the content of every regular file.
	file FileWriter
	// folders are the paths known to be real folders (made here, or
	// checked once): each is looked at once, however many entries lie
	// under it, so a tar's cost is linear in its names.
	folders map[string]bool
	// written holds the names this layer wrote, for an image's layer
	// (see ExtractLayer); nil for any other tar.
	written map[string]bool
	// keep selects the entries written (nil: all); skipped holds the
	// names of regular files it left out, for a hard link to one.
	keep    func(name string) bool
	skipped map[string]bool
	// model: see Rules; specials are the fifos and device nodes skipped.
	model    bool
	specials []Special
}

// Specials returns the fifos and device nodes a model's rules skipped so
// far, by their names in the tar.
func (x *Extractor) Specials() []Special { return x.specials }

// replace makes room at name for an entry of an image's layer: what an
// earlier layer left there goes, a folder with all it holds (a folder
// entry over a folder keeps it). It returns whether the entry is a
// whiteout, done with.
func (x *Extractor) replace(name string, h *tar.Header) (bool, error) {
	base := path.Base(name)
	dir := path.Dir(name)
	switch {
	case base == WhiteoutOpaque:
		entries, err := fs.ReadDir(x.root.FS(), dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return true, err
		}
		for _, e := range entries {
			if p := path.Join(dir, e.Name()); !x.written[p] {
				if err := x.remove(p); err != nil {
					return true, err
				}
			}
		}
		return true, nil
	case strings.HasPrefix(base, WhiteoutPrefix):
		p := path.Join(dir, strings.TrimPrefix(base, WhiteoutPrefix))
		if x.written[p] {
			return true, nil // hides only what lower layers wrote
		}
		return true, x.remove(p)
	}
	x.written[name] = true
	fi, err := x.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case h.Typeflag == tar.TypeDir && fi.IsDir():
		return false, nil
	}
	return false, x.remove(name)
}

// remove deletes name and all it holds, and forgets the folders under it.
func (x *Extractor) remove(name string) error {
	if err := x.root.RemoveAll(name); err != nil && !errors.Is(err, syscall.ENOTDIR) {
		return err // (under a file, nothing is there to remove)
	}
	for p := range x.folders {
		if p == name || strings.HasPrefix(p, name+"/") {
			delete(x.folders, p)
		}
	}
	return nil
}

// Entry unpacks entry h of the tar, whose content, for a regular file, tr
// reads (unless the extractor was given a FileWriter).
func (x *Extractor) Entry(tr *tar.Reader, h *tar.Header) error {
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
	whiteout := x.written != nil && strings.HasPrefix(path.Base(name), WhiteoutPrefix)
	if x.keep != nil && !whiteout && !x.keep(name) {
		if h.Typeflag == tar.TypeReg {
			if x.skipped == nil {
				x.skipped = map[string]bool{}
			}
			x.skipped[name] = true
		}
		return nil
	}
	if err := x.b.Take(EntryCost); err != nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	if whiteout {
		// A whiteout makes nothing, not even its folder.
		if _, err := x.replace(name, h); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
		}
		return nil
	}
	if err := x.parents(name, kinds[h.Typeflag]); errors.Is(err, ErrTooLarge) {
		return fmt.Errorf("%s: %w", h.Name, err)
	} else if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
	}
	if x.written != nil {
		if _, err := x.replace(name, h); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
		}
	}
	root := x.root
	// Permission bits only (no setuid, setgid or sticky), and no group or
	// other write: nobody but tend may change what a version holds.
	mode := fs.FileMode(h.Mode).Perm() &^ 0o022
	switch h.Typeflag {
	case tar.TypeDir:
		if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
			return fmt.Errorf("%w: %s: folder entry over an earlier %s", ErrUnsafeArchive, h.Name, fi.Mode().Type())
		}
		if err := root.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
		}
		x.folders[name] = true
		// A 1777 folder in the tar is 0755 here.
		return root.Chmod(name, mode|0o700)
	case tar.TypeReg:
		if x.file != nil {
			return x.file(root, name, h, mode)
		}
		f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrUnsafeArchive, h.Name, err)
		}
		if _, err := io.Copy(budgetWriter{f, x.b}, tr); err != nil {
			f.Close()
			return fmt.Errorf("extract %s: %w", h.Name, err)
		}
		if err := f.Chmod(mode); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		return x.keepTime(name, h)
	case tar.TypeSymlink:
		if x.model && h.Linkname != "" {
			// As the tar has it: os.Root writes it without resolving it,
			// and parents refuses any later entry beneath it.
			return root.Symlink(h.Linkname, name)
		}
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
		if err != nil && x.skipped[target] {
			return fmt.Errorf("%s: hard link to %q, which the model's include leaves out: include both", h.Name, h.Linkname)
		}
		if err != nil {
			return fmt.Errorf("%w: %s: hard link to %q: %w", ErrUnsafeArchive, h.Name, h.Linkname, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %s: hard link to %q, a %s, not a regular file", ErrUnsafeArchive, h.Name, h.Linkname, fi.Mode().Type())
		}
		return root.Link(target, name)
	}
	if kind := specialKinds[h.Typeflag]; x.model && kind != "" {
		x.specials = append(x.specials, Special{Path: name, Kind: kind})
		return nil
	}
	return fmt.Errorf("%w: %s: entries of type %q (device nodes, fifos…) are not extracted", ErrUnsafeArchive, h.Name, string(h.Typeflag))
}

// parents makes the folders above name that do not exist yet, each
// charged to the budget as an entry, and refuses a name whose parent
// folders, as already on disk, include a symlink (planted by an earlier
// entry) or a file. Following a link would land the entry somewhere its
// name does not say, so a link target checked against the name could
// point out of the folder ("d/b -> ..", then "d/b/e -> .." lands as "e ->
// .."). Every entry therefore sits under real folders only, which
// confinedLink relies on. kind names the entry in the error ("symlink",
// "file").
func (x *Extractor) parents(name, kind string) error {
	dir := path.Dir(name)
	if dir == "." || x.folders[dir] {
		return nil
	}
	p := ""
	for _, c := range strings.Split(dir, "/") {
		p = path.Join(p, c)
		if x.folders[p] {
			continue
		}
		fi, err := x.root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if err := x.b.Take(EntryCost); err != nil {
				return err
			}
			if err := x.root.Mkdir(p, 0o755); err != nil {
				return err
			}
			x.folders[p] = true
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, err := x.root.Readlink(p)
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
		x.folders[p] = true
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
	if len(n) > maxNameBytes {
		return "", fmt.Errorf("%w: a name of %d bytes (%.40q…); names are at most %d bytes", ErrUnsafeArchive, len(n), n, maxNameBytes)
	}
	if path.IsAbs(n) || strings.HasPrefix(n, "\\") {
		return "", fmt.Errorf("%w: %q is absolute", ErrUnsafeArchive, n)
	}
	clean := path.Clean(n)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %q climbs out of the folder", ErrUnsafeArchive, n)
	}
	parts := strings.Split(clean, "/")
	if len(parts) > maxNameParts {
		return "", fmt.Errorf("%w: %.40q… is %d folders deep; names are at most %d deep", ErrUnsafeArchive, n, len(parts)-1, maxNameParts-1)
	}
	for _, p := range parts {
		if len(p) > maxPartBytes {
			return "", fmt.Errorf("%w: %.40q… has a part of %d bytes; each part of a name is at most %d bytes", ErrUnsafeArchive, n, len(p), maxPartBytes)
		}
	}
	return clean, nil
}
