package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestWriteReplacesWholeWithExactMode(t *testing.T) {
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := filepath.Join(t.TempDir(), "a", "b")
	require.NoError(t, Write(dir, "f", []byte("one"), 0o644))
	require.NoError(t, Write(dir, "f", []byte("two"), 0o640))
	got, err := os.ReadFile(filepath.Join(dir, "f"))
	require.NoError(t, err)
	require.Equal(t, "two", string(got))
	fi, err := os.Stat(filepath.Join(dir, "f"))
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o640), fi.Mode().Perm(), "the umask plays no part")
	requireNoTemp(t, dir)
}

func TestWriteLongName(t *testing.T) {
	for _, base := range []string{strings.Repeat("a", 250), strings.Repeat("é", 125), strings.Repeat("🦀", 63)} {
		dir := t.TempDir()
		require.NoError(t, Write(dir, base, []byte("long"), 0o644))
		require.NoError(t, Write(dir, base, []byte("longer"), 0o644), "update over the existing file")
		got, err := os.ReadFile(filepath.Join(dir, base))
		require.NoError(t, err)
		require.Equal(t, "longer", string(got))
		requireNoTemp(t, dir)
	}
}

func TestWriteFailureLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "taken"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "taken", "x"), nil, 0o644))
	err := Write(dir, "taken", []byte("data"), 0o644)
	require.Error(t, err, "a rename over a non-empty folder fails")
	requireNoTemp(t, dir)
}

func TestSwapLink(t *testing.T) {
	dir := t.TempDir()
	r, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, SwapLink(r, "current", "/v1"))
	require.NoError(t, SwapLink(r, "current", "/v2"))
	target, err := os.Readlink(filepath.Join(dir, "current"))
	require.NoError(t, err)
	require.Equal(t, "/v2", target)
	requireNoTemp(t, dir)
}

func TestJSON(t *testing.T) {
	dir := t.TempDir()
	var v struct{ A int }
	found, err := ReadJSON(filepath.Join(dir, "missing.json"), &v)
	require.NoError(t, err)
	require.False(t, found)

	require.NoError(t, WriteJSON(dir, "s.json", struct{ A int }{7}, 0o600))
	found, err = ReadJSON(filepath.Join(dir, "s.json"), &v)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, 7, v.A)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte("{"), 0o600))
	_, err = ReadJSON(filepath.Join(dir, "bad.json"), &v)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, filepath.Join(dir, "bad.json"), "the error names the file")
}

func TestTruncateName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"shorter", "config.yaml", 64, "config.yaml"},
		{"exact", "abcd", 4, "abcd"},
		{"ascii cut", "abcdef", 4, "abcd"},
		{"cut inside a two-byte rune", "abcé", 4, "abc"},
		{"cut after a two-byte rune", "abé", 4, "abé"},
		{"cut inside a three-byte rune", "a€b", 3, "a"},
		{"cut inside a four-byte rune", "ab🦀", 5, "ab"},
		{"nothing fits", "🦀", 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := truncateName(tt.in, tt.n)
			require.Equal(t, tt.want, got)
			require.True(t, utf8.ValidString(got))
			require.LessOrEqual(t, len(got), tt.n)
		})
	}
	require.Less(t, len(TempPrefix)+tempBaseMax+1+12, 255, "a temporary name fits any file system")
}

func requireNoTemp(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		require.NoError(t, err)
		require.False(t, strings.HasPrefix(e.Name(), TempPrefix), "temporary file left: %s", p)
		return nil
	})
	require.NoError(t, err)
}
