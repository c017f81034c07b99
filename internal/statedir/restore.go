package statedir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/tend-dev/tend/internal/atomicfile"
)

// RestoreFormatCopy puts back the files a migration from format from
// kept in FormatCopy(from), for a tend of that format to run on the
// stateDir again: each file of the copy is written back atomically with
// its mode and owner (a folder the stateDir lacks is made with the
// copy's), each versioned file the copy does not hold (written since, in
// this format) is removed, then the marker (or the one the copy holds),
// and the copy last. A crash leaves the copy, and running it again
// finishes. The caller holds the stateDir lock and the agent lock. It
// returns the files it removed.
//
// The copy is read as tend made it, or not at all: only folders and
// regular files, opened without following a symlink (O_NOFOLLOW, through
// an os.Root, each file checked to be the one the walk found). The whole
// copy is checked before anything changes: one holding a symlink, a
// fifo, a device or a socket is refused, naming it, and the stateDir is
// left as it was.
func (d Dir) RestoreFormatCopy(from int) ([]string, error) {
	src := d.FormatCopy(from)
	fi, err := os.Lstat(src)
	if err != nil {
		return nil, fmt.Errorf("no copy of state format %d in %s: the first apply that succeeded after the migration removed it; "+
			"a tend of format %d cannot run on this stateDir: install a tend of format %d or later, or give the older tend a new stateDir", from, src, from, Format)
	}
	if !fi.IsDir() {
		return nil, refuseCopy(src, "", fi, nil)
	}
	cp, err := os.OpenRoot(src)
	if err != nil {
		return nil, fmt.Errorf("restore %s from %s: %w", string(d), src, err)
	}
	defer cp.Close()
	if at, err := cp.Lstat("."); err != nil || !os.SameFile(fi, at) {
		return nil, fmt.Errorf("restore %s: %s changed while it was opened; nothing was changed: run tend state restore again", string(d), src)
	}
	files, dirs, err := checkCopy(cp, src)
	if err != nil {
		return nil, err
	}

	kept := map[string]bool{}
	for _, f := range files {
		data, err := readCopied(cp, f)
		if err != nil {
			return nil, fmt.Errorf("restore %s from %s: %w", string(d), src, err)
		}
		if err := d.makeDirs(filepath.Dir(f.rel), dirs); err != nil {
			return nil, fmt.Errorf("restore %s from %s: %w", string(d), src, err)
		}
		kept[f.rel] = true
		if err := atomicfile.Write(filepath.Dir(d.join(f.rel)), filepath.Base(f.rel), data, f.fi.Mode().Perm()); err != nil {
			return nil, fmt.Errorf("restore %s from %s: %w", string(d), src, err)
		}
		if err := sameOwner(d.join(f.rel), f.fi); err != nil {
			return nil, fmt.Errorf("restore %s from %s: %w", string(d), src, err)
		}
	}
	versioned, err := d.versioned()
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, rel := range versioned {
		if !kept[rel] {
			if err := os.Remove(d.join(rel)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return removed, err
			}
			removed = append(removed, rel)
		}
	}
	if !kept[FormatFile] {
		if err := os.Remove(d.Format()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
	}
	if err := atomicfile.Sync(string(d)); err != nil {
		return removed, err
	}
	return removed, os.RemoveAll(src)
}

// copied is a regular file of a format copy, as the check found it.
type copied struct {
	rel string      // relative to the copy
	fi  fs.FileInfo // its Lstat
}

// checkCopy walks the copy in cp (at src, for messages) and returns its
// regular files and its folders (relative, with their Lstat), or refuses
// the copy at the first entry that is neither.
func checkCopy(cp *os.Root, src string) ([]copied, map[string]fs.FileInfo, error) {
	var files []copied
	dirs := map[string]fs.FileInfo{}
	var walk func(dir string) error
	walk = func(dir string) error {
		f, err := cp.Open(dir)
		if err != nil {
			return err
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return err
		}
		slices.Sort(names)
		for _, name := range names {
			rel := filepath.Join(dir, name)
			fi, err := cp.Lstat(rel)
			if err != nil {
				return err
			}
			switch {
			case fi.IsDir():
				dirs[rel] = fi
				if err := walk(rel); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				files = append(files, copied{rel: rel, fi: fi})
			default:
				return refuseCopy(src, rel, fi, cp)
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		var refused *copyError
		if errors.As(err, &refused) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("check the copy %s: %w; nothing was changed", src, err)
	}
	return files, dirs, nil
}

// copyError refuses a copy that holds what tend never writes in one.
type copyError struct{ msg string }

func (e *copyError) Error() string { return e.msg }

// refuseCopy says that rel in the copy at src (the copy itself when "")
// is not a folder nor a regular file, what it is instead, and what to do.
// cp, when not nil, reads a symlink's target.
func refuseCopy(src, rel string, fi fs.FileInfo, cp *os.Root) error {
	what := "not a regular file (mode " + fi.Mode().String() + ")"
	m := fi.Mode()
	switch {
	case m&fs.ModeSymlink != 0:
		what = "a symlink"
		if cp != nil {
			if to, err := cp.Readlink(rel); err == nil {
				what += fmt.Sprintf(" (to %q)", to)
			}
		} else if to, err := os.Readlink(src); err == nil {
			what += fmt.Sprintf(" (to %q)", to)
		}
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (fifo)"
	case m&fs.ModeDevice != 0:
		what = "a device"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	}
	if rel == "" {
		return &copyError{fmt.Sprintf("the copy %s is %s, not a folder: tend keeps its copy in a folder of the stateDir, "+
			"so it restores nothing from it and changed nothing; put back the folder tend made, or remove it "+
			"(the stateDir then stays in this tend's format)", src, what)}
	}
	return &copyError{fmt.Sprintf("%s in the copy %s is %s: a copy tend made holds only folders and regular files, "+
		"so it restores nothing from it and changed nothing; remove it (or put back what tend copied there) and run tend state restore again",
		filepath.ToSlash(rel), src, what)}
}

// readCopied reads the file f of the copy in cp: opened through cp, which
// follows no symlink out of it, and O_NONBLOCK, so that a fifo put there
// since the check cannot hang the read; it must still be the regular file
// the check found, and no longer.
func readCopied(cp *os.Root, f copied) ([]byte, error) {
	h, err := cp.OpenFile(f.rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	fi, err := h.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || !os.SameFile(fi, f.fi) {
		return nil, fmt.Errorf("%s in the copy changed since it was checked; run tend state restore again", f.rel)
	}
	data, err := io.ReadAll(io.LimitReader(h, f.fi.Size()+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != f.fi.Size() {
		return nil, fmt.Errorf("%s in the copy changed since it was checked; run tend state restore again", f.rel)
	}
	return data, nil
}

// makeDirs makes each folder on the way to dir (relative) that the
// stateDir lacks, with the mode and owner of the copy's folder.
func (d Dir) makeDirs(dir string, copyDirs map[string]fs.FileInfo) error {
	if dir == "." {
		return nil
	}
	if err := d.makeDirs(filepath.Dir(dir), copyDirs); err != nil {
		return err
	}
	at := d.join(dir)
	if _, err := os.Lstat(at); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	orig, ok := copyDirs[dir]
	if !ok {
		return os.Mkdir(at, 0o700)
	}
	if err := os.Mkdir(at, 0o700); err != nil {
		return err
	}
	return sameMode(at, orig)
}
