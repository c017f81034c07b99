package extract

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/tend-dev/tend/internal/printable"
)

// ErrTooLarge means unpacking a layer wrote more than its budget: more
// than the room the node has for it (a decompression bomb, or a layer that
// does not fit).
var ErrTooLarge = errors.New("unpacks to more than the room for it")

// Budget bounds the bytes extraction writes, counted as they are written,
// and EntryCost for every entry it creates (a folder, an empty file, a
// link take a block and an inode), so that a small layer of millions of
// empty entries cannot exhaust the file system either. A nil Budget is no
// bound.
type Budget struct {
	Limit   int64
	Written int64
}

// EntryCost is what one entry costs the budget besides its content: an
// entry's own, and each folder created for it that the tar does not list.
const EntryCost = 4096

// Take counts n more bytes, or fails once the budget is spent. Layers
// unpacked at once may share a budget: Take is safe for concurrent use
// (Written is read once they are done).
func (b *Budget) Take(n int64) error {
	if b == nil {
		return nil
	}
	if atomic.AddInt64(&b.Written, n) > b.Limit {
		return fmt.Errorf("%w: more than %s written", ErrTooLarge, printable.HumanBytes(b.Limit))
	}
	return nil
}

// Writer returns w written under b: each write is taken from b first,
// and fails once b is spent.
func (b *Budget) Writer(w io.Writer) io.Writer { return budgetWriter{w, b} }

// budgetWriter is a file written under a budget.
type budgetWriter struct {
	w io.Writer
	b *Budget
}

func (w budgetWriter) Write(p []byte) (int, error) {
	if err := w.b.Take(int64(len(p))); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}
