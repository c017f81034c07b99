package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"unicode/utf8"

	"github.com/tend-dev/tend/internal/failpoint"
)

// TempPrefix starts the name of every temporary file tend writes.
const TempPrefix = ".tend-"

// tempBaseMax is how many bytes of the target's name a temporary file's
// name keeps, so that it stays far below the 255-byte limit of a name.
const tempBaseMax = 64

// DirMode is the mode of every folder tend creates for a file it writes.
const DirMode fs.FileMode = 0o755

// WriteIn replaces name inside r with data and mode: it writes a temporary
// file in the same folder, sets its mode exactly (the umask plays no part),
// fsyncs it, renames it over name and fsyncs the folder. A crash at any
// point leaves either the old or the new file at name. The temporary file
// is removed on any error.
func WriteIn(r *os.Root, name string, data []byte, mode fs.FileMode) (err error) {
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
	failpoint.Hit("atomic:temp")
	if err := r.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s to %s: %w", path.Join(r.Name(), tmp), path.Join(r.Name(), name), Cause(err))
	}
	failpoint.Hit("atomic:renamed")
	return SyncIn(r, dir)
}

// Write replaces dir/name with data and mode as WriteIn does. dir is
// created (DirMode) when missing; the file's mode guards the data.
func Write(dir, name string, data []byte, mode fs.FileMode) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return WriteIn(root, name, data, mode)
}

// Rename moves the finished file from to to and fsyncs to's folder, so the
// new name survives a power cut once Rename returns. It publishes what was
// written and synced elsewhere, such as a verified download.
func Rename(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return Sync(filepath.Dir(to))
}

// SwapLink points the symlink rel inside r at target atomically: a new link
// is made beside it and renamed over it, so the path always resolves to the
// old target or the new one. A link that already points at target is left
// alone.
func SwapLink(r *os.Root, rel, target string) error {
	if cur, err := r.Readlink(rel); err == nil && cur == target {
		return nil
	}
	dir, base := path.Split(rel)
	tmp := dir + tempName(base)
	if err := r.Symlink(target, tmp); err != nil {
		return fmt.Errorf("create symlink in %s: %w", path.Join(r.Name(), dir), Cause(err))
	}
	failpoint.Hit("atomic:temp-link")
	if err := r.Rename(tmp, rel); err != nil {
		_ = r.Remove(tmp)
		return fmt.Errorf("rename %s to %s: %w", path.Join(r.Name(), tmp), path.Join(r.Name(), rel), Cause(err))
	}
	return SyncIn(r, dir)
}

// SyncIn fsyncs folder dir inside r ("" is r itself) so that a rename or
// removal in it survives a crash.
func SyncIn(r *os.Root, dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := r.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", path.Join(r.Name(), dir), Cause(err))
	}
	defer d.Close()
	return d.Sync()
}

// Sync fsyncs folder dir, making the names in it durable. A file system
// that cannot sync folders is no error.
func Sync(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// createTemp creates a new file ".tend-<base>-<random>" in dir inside r,
// base cut to tempBaseMax bytes.
func createTemp(r *os.Root, dir, base string) (string, *os.File, error) {
	for range 10 {
		name := dir + tempName(base)
		f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("create temporary file in %s: %w", path.Join(r.Name(), dir), Cause(err))
		}
		return name, f, nil
	}
	return "", nil, fmt.Errorf("create temporary file in %s: too many name collisions", path.Join(r.Name(), dir))
}

// tempName is a fresh temporary name for a file called base.
func tempName(base string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return TempPrefix + truncateName(base, tempBaseMax) + "-" + hex.EncodeToString(b[:])
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

// Cause returns the cause of a *fs.PathError or *os.LinkError, whose
// relative paths would only repeat what the caller says better.
func Cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
