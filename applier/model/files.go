package model

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tend-dev/tend/internal/confine"
)

// walkVersion stamps every entry under root, keyed by slash path.
func walkVersion(root string) (map[string]fileStamp, error) {
	if _, err := os.Lstat(root); err != nil {
		return nil, err
	}
	found := map[string]fileStamp{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := e.Info()
		if err != nil {
			return err
		}
		st := fileStamp{Path: filepath.ToSlash(rel), Mode: uint32(fi.Mode().Perm())}
		switch {
		case fi.IsDir():
			st.Type = "dir"
		case fi.Mode()&fs.ModeSymlink != 0:
			st.Type = "link"
			if st.Target, err = os.Readlink(p); err != nil {
				return err
			}
			st.Mode = 0
		case fi.Mode().IsRegular():
			st.Size = fi.Size()
			st.Ino, st.Mtime, st.Ctime = statIDs(fi)
		default:
			st.Type = "other"
		}
		found[st.Path] = st
		return nil
	})
	return found, err
}

// hashFile returns "sha256:<hex>" of the file at p.
func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	r, err := os.OpenRoot(filepath.Dir(p))
	if err != nil {
		return "", err
	}
	defer r.Close()
	return confine.Digest(r, filepath.Base(p), fi)
}

// removeTree removes p and everything under it, making read-only folders
// (as unpacked layers may have) writable first.
func removeTree(p string) error {
	err := os.RemoveAll(p)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	_ = filepath.WalkDir(p, func(q string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			_ = os.Chmod(q, 0o755)
		}
		return nil
	})
	return os.RemoveAll(p)
}
