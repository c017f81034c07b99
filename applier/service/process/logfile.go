//go:build linux

package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/internal/flock"
)

// Log files of an instance: REPLICA.log is the current one, REPLICA.log.1
// … REPLICA.log.KEEP its rotated copies (newest first) and REPLICA.log.prev
// the last instance's (see service.PreviousLog). Every file is at most the
// cap, so a replica's logs take at most (KEEP+2) × the cap. The log shim
// rotates and the runtime moves a file to .prev under an flock on the
// folder, so the two never rename each other's files.

// openLog starts the log file of a new instance at path: it moves the last
// instance's output to service.PreviousLog(path) (an empty file is
// dropped, so a .prev worth reading stays) and opens a new file for
// appending. The folder is created.
func openLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create log folder: %w", err)
	}
	unlock, err := lockLogDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer unlock()
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.Size() > 0:
		if err := os.Rename(path, service.PreviousLog(path)); err != nil {
			return nil, fmt.Errorf("keep the last instance's log: %w", err)
		}
	case err == nil:
		// A new inode, not the empty one: a shim of the last instance
		// still draining its pipe writes to its own file, not this one.
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove empty log file: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("open log file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log file: %w", err)
	}
	return f, nil
}

// lockLogDir takes the flock on the log folder dir, waiting for it.
func lockLogDir(dir string) (unlock func(), err error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock log folder: %w", err)
	}
	if err := flock.Flock(d, flock.Exclusive); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("lock log folder %s: %w", dir, err)
	}
	return func() { _ = d.Close() }, nil // closing lets go of the lock
}

// rotatingLog writes an instance's output to its log file and rotates the
// file before a write would take it over max bytes: the current file
// becomes path.1, older copies shift up to path.keep and the oldest is
// dropped (keep 0: the file is truncated). A chunk that does not fit is
// not split unless it is larger than max, so lines mostly stay whole.
//
// Write never fails: output that cannot be written (a full disk) is
// dropped and counted, and a note saying how much was lost is written
// when writing works again, so the service never blocks on its log. Once
// a new instance took over path (its file moved to .prev), the file is
// not rotated any more: it is written up to max, and the rest dropped.
type rotatingLog struct {
	path string
	max  int64
	keep int

	f          *os.File // the file written, opened for appending
	size       int64
	superseded bool  // f is no longer at path
	dropped    int64 // bytes dropped since the last successful write
	dropErr    error // why the last of them were
}

// newRotatingLog writes to f, the file at path opened for appending.
func newRotatingLog(f *os.File, path string, max int64, keep int) (*rotatingLog, error) {
	if max <= 0 || keep < 0 {
		return nil, fmt.Errorf("log %s: cap %d and copies %d must be positive", path, max, keep)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("log %s: %w", path, err)
	}
	return &rotatingLog{path: path, max: max, keep: keep, f: f, size: fi.Size()}, nil
}

// Write writes p, rotating as needed; it always returns len(p), nil.
func (l *rotatingLog) Write(p []byte) (int, error) {
	n := len(p)
	if l.dropped > 0 {
		note := fmt.Sprintf("[tend: %d bytes of output dropped: %v]\n", l.dropped, l.dropErr)
		dropped, why := l.dropped, l.dropErr
		l.dropped, l.dropErr = 0, nil
		l.write([]byte(note))
		if l.dropped > 0 { // still failing: the note is not output
			l.dropped, l.dropErr = dropped, why
		}
	}
	l.write(p)
	return n, nil
}

// write writes p in pieces that fit, rotating between them.
func (l *rotatingLog) write(p []byte) {
	for len(p) > 0 {
		if l.size > 0 && int64(len(p)) > l.max-l.size {
			if err := l.rotate(); err != nil {
				l.drop(int64(len(p)), err)
				return
			}
		}
		k := min(int64(len(p)), l.max-l.size)
		if k <= 0 {
			l.drop(int64(len(p)), errors.New("log file at its cap"))
			return
		}
		w, err := l.f.Write(p[:k])
		l.size += int64(w)
		if err != nil {
			l.drop(int64(len(p)-w), err)
			return
		}
		p = p[k:]
	}
}

func (l *rotatingLog) drop(n int64, err error) {
	l.dropped += n
	l.dropErr = err
}

// errSuperseded: a new instance's file is at path.
var errSuperseded = errors.New("a newer instance writes this log; the rest of this one's output is dropped")

// rotate moves the current file to path.1, shifting the older copies,
// and opens a new one at path, under the folder's lock. The new file is
// created first, so a failure changes nothing.
func (l *rotatingLog) rotate() error {
	if l.superseded {
		return errSuperseded
	}
	if l.keep == 0 {
		if err := l.f.Truncate(0); err != nil {
			return fmt.Errorf("truncate log: %w", err)
		}
		l.size = 0
		return nil
	}
	unlock, err := lockLogDir(filepath.Dir(l.path))
	if err != nil {
		return err
	}
	defer unlock()
	own, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	if fi, err := os.Stat(l.path); err != nil || !os.SameFile(own, fi) {
		l.superseded = true
		return errSuperseded
	}
	next := l.path + ".next"
	nf, err := os.OpenFile(next, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, own.Mode().Perm())
	if err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	if err := l.shift(); err != nil {
		_ = nf.Close()
		_ = os.Remove(next)
		return err
	}
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		_ = nf.Close()
		_ = os.Remove(next)
		return fmt.Errorf("rotate log: %w", err)
	}
	if err := os.Rename(next, l.path); err != nil {
		// The current file is .1 now: nothing more goes to it.
		_ = nf.Close()
		_ = os.Remove(next)
		l.superseded = true
		return fmt.Errorf("rotate log: %w", err)
	}
	_ = l.f.Close()
	l.f, l.size = nf, 0
	return nil
}

// shift drops path.keep and renames path.N to path.N+1.
func (l *rotatingLog) shift() error {
	if err := os.Remove(l.path + "." + strconv.Itoa(l.keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rotate log: %w", err)
	}
	for i := l.keep - 1; i >= 1; i-- {
		from, to := l.path+"."+strconv.Itoa(i), l.path+"."+strconv.Itoa(i+1)
		if err := os.Rename(from, to); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotate log: %w", err)
		}
	}
	return nil
}

// Close closes the file.
func (l *rotatingLog) Close() error { return l.f.Close() }
