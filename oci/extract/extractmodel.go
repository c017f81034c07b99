package extract

import (
	"archive/tar"
	"time"
)

// What a model's tar layer unpacks to differs from a fleet artifact's
// (see Rules.Model, applied in Extractor.Entry): a symlink is written as
// the tar has it, and a fifo or device node is skipped, named as a
// Special. keepTime gives every regular file the modification time its
// entry has, as a model's files keep them.

// A Special is a fifo or device node of a model's tar layer, which its
// version folder leaves out: tend writes no special files.
type Special struct {
	Path string // in the version folder
	Kind string // "fifo", "character device", "block device"
}

func (s Special) String() string { return s.Kind + " " + s.Path }

// specialKinds names the special files a model's version skips.
var specialKinds = map[byte]string{
	tar.TypeFifo:  "fifo",
	tar.TypeChar:  "character device",
	tar.TypeBlock: "block device",
}

// keepTime gives the regular file name the modification time h has, as
// tar -x does (a hard link to a tree's file has it already).
func (x *Extractor) keepTime(name string, h *tar.Header) error {
	if h.ModTime.IsZero() {
		return nil
	}
	return x.root.Chtimes(name, time.Time{}, h.ModTime)
}
