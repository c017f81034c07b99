package reserve

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Size is the space the agent keeps: room for a tick's records and the
// managed files it reverts, which are rarely larger.
const Size = 8 << 20

// Reserve is a file of Size bytes, with its blocks allocated.
type Reserve struct {
	path string
	size int64
}

// New is the reserve at path, of size bytes; nothing is written yet.
func New(path string, size int64) *Reserve { return &Reserve{path: path, size: size} }

// Path is where the reserve is.
func (r *Reserve) Path() string { return r.path }

// Held reports whether the reserve is on disk, whole.
func (r *Reserve) Held() bool {
	fi, err := os.Stat(r.path)
	return err == nil && fi.Size() == r.size
}

// Release deletes the reserve, and reports whether there was one to free.
func (r *Reserve) Release() (bool, error) {
	err := os.Remove(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("release disk reserve %s: %w", r.path, err)
	}
	return true, nil
}

// Full reports whether err is a write that found the disk (or a quota)
// full, and which path it was writing when the error says ("" when not).
func Full(err error) (path string, full bool) {
	if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
		return "", false
	}
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Path, true
	case errors.As(err, &le):
		return le.New, true
	}
	return "", true
}
