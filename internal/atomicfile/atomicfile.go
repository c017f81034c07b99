package atomicfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
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
// is removed on any error, and what a killed write left is removed by the
// next (see TempName).
func WriteIn(r *os.Root, name string, data []byte, mode fs.FileMode) error {
	return writeIn(r, name, data, mode, true)
}

// writeIn is WriteIn; without syncDir the folder is not fsynced after the
// rename (see WriteJSONNoDirSync).
func writeIn(r *os.Root, name string, data []byte, mode fs.FileMode, syncDir bool) (err error) {
	dir, base := path.Split(name)
	tmp, f, err := createTemp(r, dir, base)
	if err != nil {
		return err
	}
	// Closing f releases the lock createTemp took: after the rename.
	defer f.Close()
	defer func() {
		if err != nil {
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
	failpoint.Hit("atomic:temp")
	if err := r.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s to %s: %w", path.Join(r.Name(), tmp), path.Join(r.Name(), name), Cause(err))
	}
	failpoint.Hit("atomic:renamed")
	if !syncDir {
		return nil
	}
	return SyncIn(r, dir)
}

// Write replaces dir/name with data and mode as WriteIn does. dir is
// created (DirMode) when missing; the file's mode guards the data.
func Write(dir, name string, data []byte, mode fs.FileMode) error {
	return write(dir, name, data, mode, true)
}

func write(dir, name string, data []byte, mode fs.FileMode, syncDir bool) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return writeIn(root, name, data, mode, syncDir)
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
	tmp := dir + TempName(base)
	if err := r.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale temporary link %s: %w", path.Join(r.Name(), tmp), Cause(err))
	}
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

// createTemp creates the temporary file of base in dir inside r (see
// TempName), new (O_EXCL: never a file someone else made, nor one a link
// leads to) and locked (flock) for the caller until it closes it. A file
// already at the name is another write's: one in progress is waited for
// (it renames or removes its file), what a killed write left, or anything
// planted there, is removed. Two writers of one file so take turns.
func createTemp(r *os.Root, dir, base string) (string, *os.File, error) {
	name := dir + TempName(base)
	where := path.Join(r.Name(), name)
	for range 100 {
		f, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
		if errors.Is(err, fs.ErrExist) {
			ok, release, err := claim(r, name, true)
			if err != nil {
				return "", nil, err
			}
			if ok {
				err := r.Remove(name)
				release()
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return "", nil, fmt.Errorf("remove stale temporary file %s: %w", where, Cause(err))
				}
			}
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("create temporary file %s: %w", where, Cause(err))
		}
		if err := lock(f, true); err != nil {
			_ = f.Close()
			return "", nil, fmt.Errorf("lock temporary file %s: %w", where, err)
		}
		if !still(r, name, f) {
			_ = f.Close() // taken for stale by a writer before us: start over
			continue
		}
		return name, f, nil
	}
	return "", nil, fmt.Errorf("create temporary file %s: it keeps being replaced by another writer", where)
}

// claim reports whether the temporary file name inside r may be removed
// now: it is anything but a regular file (a link planted there), or a
// regular file no write holds, whose lock claim then holds until release
// is called (after the removal). With wait it waits for a write in
// progress, which renames or removes the file: then there is nothing to
// remove. The file is opened read-only, never through a symlink.
func claim(r *os.Root, name string, wait bool) (ok bool, release func(), err error) {
	none := func() {}
	fi, err := r.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, none, nil
	case err != nil:
		return false, none, fmt.Errorf("stat %s: %w", path.Join(r.Name(), name), Cause(err))
	case !fi.Mode().IsRegular():
		return true, none, nil
	}
	f, err := r.OpenFile(name, os.O_RDONLY|oNoFollow|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, none, nil
	case err != nil:
		return false, none, fmt.Errorf("open %s: %w", path.Join(r.Name(), name), Cause(err))
	}
	if err := lock(f, wait); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, none, nil
		}
		return false, none, fmt.Errorf("lock %s: %w", path.Join(r.Name(), name), err)
	}
	if !still(r, name, f) {
		_ = f.Close()
		return false, none, nil
	}
	return true, func() { _ = f.Close() }, nil
}

// still reports whether name inside r is the file f has open.
func still(r *os.Root, name string, f *os.File) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := r.Lstat(name)
	return err == nil && os.SameFile(a, b)
}

// TempName is the name of the temporary file a write of base goes
// through: ".tend-<base, cut to 64 bytes>-<12 hex digits of its hash>",
// the same for every write of base, so what a write killed half-way leaves
// is removed by the next write of base (and by a delete of base).
func TempName(base string) string {
	sum := sha256.Sum256([]byte(base))
	return TempPrefix + truncateName(base, tempBaseMax) + "-" + hex.EncodeToString(sum[:6])
}

// IsTemp reports whether name is the temporary name of a write of the file
// it names (TempName). A name cut short (a file name over 64 bytes) cannot
// be told from another's file, and is not one.
func IsTemp(name string) bool {
	rest, ok := strings.CutPrefix(name, TempPrefix)
	if !ok {
		return false
	}
	i := strings.LastIndexByte(rest, '-')
	return i > 0 && TempName(rest[:i]) == name
}

// RemoveTemps removes from folder dir inside r ("" is r itself) what
// killed writes left there: the entries IsTemp names that no write holds
// (a write in progress keeps its lock), and returns their names. A folder
// that is not there has none.
func RemoveTemps(r *os.Root, dir string) ([]string, error) {
	if dir == "" {
		dir = "."
	}
	d, err := r.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", path.Join(r.Name(), dir), Cause(err))
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", path.Join(r.Name(), dir), err)
	}
	var removed []string
	var errs []error
	for _, n := range names {
		if !IsTemp(n) {
			continue
		}
		name := path.Join(dir, n)
		ok, release, err := claim(r, name, false)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue
		}
		err = r.Remove(name)
		release()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", path.Join(r.Name(), name), Cause(err)))
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
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
