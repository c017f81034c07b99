//go:build unix

package statedir_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
)

// TestRestoreRefusesAnUnsafeCopy plants in the copy a migration kept
// what tend never writes there: a symlink to a file outside, a symlinked
// folder, a link inside the copy, a fifo, a device, the copy itself a
// symlink. Each is refused, naming it, before anything changes: the
// stateDir is as it was (every entry's type, mode and content, read
// without following a link or opening a fifo), and so is what the links
// lead to.
func TestRestoreRefusesAnUnsafeCopy(t *testing.T) {
	cases := []struct {
		name     string
		plant    func(t *testing.T, copyDir, outside string)
		contains string // {copy} is the copy's path, {outside} a folder outside the stateDir
	}{
		{"a symlink to a file outside", func(t *testing.T, copyDir, outside string) {
			replace(t, filepath.Join(copyDir, statedir.InventoryFile), func(p string) error {
				return os.Symlink(filepath.Join(outside, "secret"), p)
			})
		}, `inventory.json in the copy {copy} is a symlink (to "{outside}/secret"): a copy tend made holds only folders and regular files`},
		{"a symlinked folder", func(t *testing.T, copyDir, outside string) {
			infer := filepath.Join(copyDir, "services", "infer")
			require.NoError(t, os.CopyFS(filepath.Join(outside, "infer"), os.DirFS(infer)))
			replace(t, infer, func(p string) error { return os.Symlink(filepath.Join(outside, "infer"), p) })
		}, `services/infer in the copy {copy} is a symlink (to "{outside}/infer")`},
		{"a symlink inside the copy", func(t *testing.T, copyDir, _ string) {
			replace(t, filepath.Join(copyDir, "models", "refused.json"), func(p string) error {
				return os.Symlink("../"+statedir.InventoryFile, p)
			})
		}, `models/refused.json in the copy {copy} is a symlink (to "../inventory.json")`},
		{"a fifo", func(t *testing.T, copyDir, _ string) {
			replace(t, filepath.Join(copyDir, "services", "cam", "0.json"), func(p string) error { return syscall.Mkfifo(p, 0o644) })
		}, "services/cam/0.json in the copy {copy} is a named pipe (fifo)"},
		{"a device", func(t *testing.T, copyDir, _ string) {
			err := syscall.Mknod(filepath.Join(copyDir, "models", "null"), syscall.S_IFCHR|0o666, 0x103) // as /dev/null
			if errors.Is(err, syscall.EPERM) {
				t.Skip("making a device node needs root (CAP_MKNOD); the other cases run")
			}
			require.NoError(t, err)
		}, "models/null in the copy {copy} is a device"},
		{"the copy a symlink", func(t *testing.T, copyDir, outside string) {
			require.NoError(t, os.CopyFS(filepath.Join(outside, "format-1"), os.DirFS(copyDir)))
			replace(t, copyDir, func(p string) error { return os.Symlink(filepath.Join(outside, "format-1"), p) })
		}, `the copy {copy} is a symlink (to "{outside}/format-1"), not a folder`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := fixture(t)
			outside := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("not tend's\n"), 0o600))
			_, err := d.Migrate("v1", "c")
			require.NoError(t, err)
			require.NoError(t, statedir.WriteJSON(d.Services().Service("new"), statedir.ServiceFile, map[string]int{"replicas": 1}, 0o644))
			tc.plant(t, d.FormatCopy(1), outside)
			before, beforeOutside := entries(t, string(d)), entries(t, outside)

			removed, err := d.RestoreFormatCopy(1)
			require.Error(t, err)
			require.Empty(t, removed)
			want := strings.NewReplacer("{copy}", d.FormatCopy(1), "{outside}", outside).Replace(tc.contains)
			require.Contains(t, err.Error(), want)
			require.Contains(t, err.Error(), "so it restores nothing from it and changed nothing")
			require.Equal(t, before, entries(t, string(d)), "the stateDir is as it was")
			require.Equal(t, beforeOutside, entries(t, outside), "what the links lead to is as it was")
			t.Log(err)
		})
	}
}

// A copy put back keeps the modes: each file's, and a folder's the
// stateDir lost since (the model removed after the migration).
func TestRestoreKeepsModes(t *testing.T) {
	d := fixture(t)
	orig := entries(t, string(d))
	_, err := d.Migrate("v1", "c")
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(string(d), "models", "detector")))

	_, err = d.RestoreFormatCopy(1)
	require.NoError(t, err)
	require.Equal(t, orig, entries(t, string(d)))
	require.Equal(t, "dir drwxr-xr-x", orig["models/detector"], "the fixture's folder mode")
}

// replace removes what is at p and puts what mk makes there.
func replace(t *testing.T, p string, mk func(p string) error) {
	t.Helper()
	require.NoError(t, os.RemoveAll(p))
	require.NoError(t, mk(p))
}

// entries describes every entry under dir (relative) without following a
// link or opening anything but a regular file: a folder's mode, a
// symlink's target, a regular file's mode and content, another's type.
func entries(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch m := fi.Mode(); {
		case m.IsDir():
			out[rel] = "dir " + m.String()
		case m&fs.ModeSymlink != 0:
			to, err := os.Readlink(p)
			out[rel] = "link " + to
			return err
		case m.IsRegular():
			b, err := os.ReadFile(p)
			out[rel] = "file " + m.String() + " " + string(b)
			return err
		default:
			out[rel] = "other " + m.String()
		}
		return nil
	}))
	return out
}
