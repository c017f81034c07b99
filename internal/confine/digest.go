package confine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
)

// copyBufs holds the buffers Digest reads files through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// Digest returns the content digest ("sha256:<hex>") of the regular file
// rel inside dir, which must still be the file fi describes.
func Digest(dir *os.Root, rel string, fi fs.FileInfo) (string, error) {
	f, err := dir.Open(rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() || !os.SameFile(fi, st) {
		return "", fmt.Errorf("%s changed while tend read it; try again", f.Name())
	}
	h := sha256.New()
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	// The struct hides f's WriterTo, which would not use buf.
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, *buf); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
