package service

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
)

// Log files of process services: each is rotated at LogMaxBytes, and
// LogKeep rotated copies are kept, besides the current file and the last
// instance's (PreviousLog): at most (LogKeep+2) × LogMaxBytes a replica.
const (
	LogMaxBytes = 10 << 20
	LogKeep     = 3
)

// PreviousLog is where the output of the instance before the one that
// writes path is kept: a runtime that writes its instances' output to a
// file (the process runtime) moves what is there to it when it starts a
// new instance, so that path holds the current instance's output.
func PreviousLog(path string) string { return path + ".prev" }

// RotateLog caps a log file a running process appends to itself (an
// instance started by a tend before log shims): when it is larger
// than max bytes, it is copied to path.1 (older copies shift to .2 … .keep,
// the oldest dropped) and truncated in place (copytruncate: the process's
// O_APPEND fd keeps working, its next write lands at the new end). With
// keep 0 the file is only truncated. A missing file is no error.
//
// As with logrotate's copytruncate, what the process writes between the
// end of the copy and the truncation (a few microseconds) is lost, and a
// copy may end in the middle of a line.
func RotateLog(path string, max int64, keep int) error {
	if max <= 0 || keep < 0 {
		return fmt.Errorf("rotate log %s: max %d and keep %d must be positive", path, max, keep)
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	if fi.Size() <= max {
		return nil
	}
	if keep > 0 {
		if err := shiftLogs(path, keep); err != nil {
			return err
		}
		if err := copyLog(path, path+".1"); err != nil {
			return err
		}
	}
	if err := os.Truncate(path, 0); err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	return nil
}

// shiftLogs drops path.keep and renames path.N to path.N+1, making room
// for path.1.
func shiftLogs(path string, keep int) error {
	if err := os.Remove(path + "." + strconv.Itoa(keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rotate log: %w", err)
	}
	for i := keep - 1; i >= 1; i-- {
		from, to := path+"."+strconv.Itoa(i), path+"."+strconv.Itoa(i+1)
		if err := os.Rename(from, to); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotate log: %w", err)
		}
	}
	return nil
}

// copyLog copies src, as far as it is written, to dst through a temporary
// file, so dst is never a partial copy.
func copyLog(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	// Copy to the end, and again while the end moves: the process keeps
	// appending, and a write that spans a page can show half its line at
	// first.
	for range 3 {
		var n int64
		if n, err = io.Copy(out, in); err != nil || n == 0 {
			break
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("rotate log %s: %w", src, err)
	}
	return nil
}
