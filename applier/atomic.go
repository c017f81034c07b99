package applier

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"unicode/utf8"
)

// tempPrefix starts the name of every temporary file tend writes.
const tempPrefix = ".tend-"

// tempBaseMax is how many bytes of the target's name a temporary file's
// name keeps, so that it stays far below the 255-byte limit of a name.
const tempBaseMax = 64

// writeAtomic replaces name inside r with data and mode: it writes a
// temporary file in the same directory, sets its mode exactly (the umask
// plays no part), fsyncs it, renames it over name and fsyncs the directory.
// A crash at any point leaves either the old or the new file at name. The
// temporary file is removed on any error.
func writeAtomic(r *os.Root, name string, data []byte, mode fs.FileMode) (err error) {
	dir, base := path.Split(name)
	tmp, f, err := createTemp(r, dir, base)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = r.Remove(tmp)
		}
	}()
	// Errors of f name the operation and f's full path.
	if _, err := f.Write(data); err != nil {
		return err
	}
	// fchmod is not subject to the umask; after the write, so that the
	// kernel does not clear setuid or setgid bits again.
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := r.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s to %s: %w", path.Join(r.Name(), tmp), path.Join(r.Name(), name), unwrapLink(err))
	}
	return syncDir(r, dir)
}

// createTemp creates a new file ".tend-<base>-<random>" in dir inside r,
// base cut to tempBaseMax bytes.
func createTemp(r *os.Root, dir, base string) (string, *os.File, error) {
	base = truncateName(base, tempBaseMax)
	for range 10 {
		var b [6]byte
		_, _ = rand.Read(b[:])
		name := dir + tempPrefix + base + "-" + hex.EncodeToString(b[:])
		f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("create temporary file in %s: %w", path.Join(r.Name(), dir), unwrapPath(err))
		}
		return name, f, nil
	}
	return "", nil, fmt.Errorf("create temporary file in %s: too many name collisions", path.Join(r.Name(), dir))
}

// truncateName returns the longest prefix of s of at most n bytes that does
// not cut a UTF-8 sequence in two.
func truncateName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// syncDir fsyncs directory dir inside r so that a rename or removal in it
// survives a crash.
func syncDir(r *os.Root, dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := r.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", path.Join(r.Name(), dir), unwrapPath(err))
	}
	defer d.Close()
	return d.Sync()
}

// unwrapPath returns the cause of a *fs.PathError, whose relative path
// would only repeat what the caller says better.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// unwrapLink is unwrapPath for the *os.LinkError of a rename.
func unwrapLink(err error) error {
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
