package confine

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNew(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		name    string
		root    string
		allow   []string
		wantErr string
	}{
		{"ok", root, []string{"/etc/infer", "/opt/models"}, ""},
		{"empty root", "", nil, "root is empty"},
		{"missing root", filepath.Join(root, "missing"), nil, "no such file or directory"},
		{"relative allow path", root, []string{"etc/infer"}, `allowPaths entry "etc/infer": invalid path`},
		{"unclean allow path", root, []string{"/etc/infer/../x"}, `allowPaths entry "/etc/infer/../x": invalid path`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.root, tt.allow)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestLocate(t *testing.T) {
	allow := []string{"/etc/infer/sub", "/etc/infer", "/opt/models"}
	tests := []struct {
		path, wantAllow, wantRel string
		wantIs                   error
	}{
		{"/etc/infer/a/b", "/etc/infer", "a/b", nil},
		{"/etc/infer/sub/x", "/etc/infer", "sub/x", nil}, // the outermost allowed directory holding it
		{"/opt/models/m", "/opt/models", "m", nil},
		{"/etc/inferX", "", "", ErrNotAllowed},
		{"/etc/infer", "", "", ErrNotAllowed},
		{"/etc/infer/../passwd", "", "", ErrInvalidPath},
		{"relative", "", "", ErrInvalidPath},
		{"/etc/infer/a\x00", "", "", ErrInvalidPath},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			a, rel, err := Locate(tt.path, allow)
			if tt.wantIs != nil {
				require.ErrorIs(t, err, tt.wantIs)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantAllow, a)
			require.Equal(t, tt.wantRel, rel)
		})
	}
	_, _, err := Locate("/opt/models", allow)
	require.ErrorContains(t, err, `"/opt/models" is an allowPaths entry itself; declare a path under it`, "not called outside allowPaths")
	_, _, err = Locate("/etc/x", nil)
	require.ErrorContains(t, err, "(none configured)")
}

func TestMissing(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), nil, 0o644))
	_, err := os.Lstat(filepath.Join(dir, "f", "below"))
	require.ErrorIs(t, err, syscall.ENOTDIR)
	require.True(t, Missing(err), "a parent that is a file means nothing is there")
	_, err = os.Lstat(filepath.Join(dir, "none"))
	require.True(t, Missing(err))
	require.False(t, Missing(nil))
	require.False(t, Missing(os.ErrPermission))
}
