package file

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/confine"
	"github.com/tend-dev/tend/planner"
)

func TestConfinementPaths(t *testing.T) {
	tests := []struct {
		name    string
		path    string
		wantIs  error
		wantMsg string
	}{
		{"dot dot", "/etc/infer/../../x", confine.ErrInvalidPath, `write it as "/x"`},
		{"leading dot dot", "/../etc/infer/x", confine.ErrInvalidPath, "not clean"},
		{"relative", "etc/infer/x", confine.ErrInvalidPath, "not a file resource id"},
		{"trailing slash", "/etc/infer/x/", confine.ErrInvalidPath, "not clean"},
		{"double slash", "/etc/infer//x", confine.ErrInvalidPath, "not clean"},
		{"outside allowPaths", "/etc/passwd", confine.ErrNotAllowed,
			"/etc/passwd is not under any allowed path (/etc/infer); add an allowPaths entry for it to the agent config"},
		{"sibling with shared prefix", "/etc/inferX/config.yaml", confine.ErrNotAllowed, "/etc/inferX/config.yaml is not under"},
		{"the allowed directory itself", "/etc/infer", confine.ErrNotAllowed, `"/etc/infer" is an allowPaths entry itself; declare a path under it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, root := newDriver(t)
			err := writeFile(t, d, tt.path, "x", "")
			require.ErrorIs(t, err, tt.wantIs)
			require.ErrorContains(t, err, tt.wantMsg)
			_, err = d.Observe(context.Background(), planner.FileID(tt.path), nil)
			require.ErrorIs(t, err, tt.wantIs)
			require.Empty(t, tree(t, root), "nothing may be written")
		})
	}
}

func TestConfinementSymlinks(t *testing.T) {
	type dirs struct{ root, outside string }
	tests := []struct {
		name   string
		setup  func(t *testing.T, d dirs)
		path   string
		wantIs error
		// untouched lists the directories that must stay empty.
		untouched func(d dirs) []string
	}{
		{
			name: "allowed dir links outside root",
			setup: func(t *testing.T, d dirs) {
				require.NoError(t, os.MkdirAll(filepath.Join(d.root, "etc"), 0o755))
				require.NoError(t, os.Symlink(d.outside, filepath.Join(d.root, "etc/infer")))
			},
			path: "/etc/infer/config.yaml", wantIs: confine.ErrSymlinkEscape,
			untouched: func(d dirs) []string { return []string{d.outside} },
		},
		{
			name: "allowed dir links to a sibling inside root",
			setup: func(t *testing.T, d dirs) {
				require.NoError(t, os.MkdirAll(filepath.Join(d.root, "etc/other"), 0o755))
				require.NoError(t, os.Symlink("other", filepath.Join(d.root, "etc/infer")))
			},
			path: "/etc/infer/config.yaml", wantIs: confine.ErrSymlinkEscape,
			untouched: func(d dirs) []string { return []string{filepath.Join(d.root, "etc/other")} },
		},
		{
			name: "allowed dir links to its parent",
			setup: func(t *testing.T, d dirs) {
				require.NoError(t, os.MkdirAll(filepath.Join(d.root, "etc"), 0o755))
				require.NoError(t, os.Symlink(filepath.Join(d.root, "etc"), filepath.Join(d.root, "etc/infer")))
			},
			path: "/etc/infer/passwd", wantIs: confine.ErrSymlinkEscape,
			untouched: func(d dirs) []string { return nil },
		},
		{
			name: "ancestor of allowed dir links outside root",
			setup: func(t *testing.T, d dirs) {
				require.NoError(t, os.Mkdir(filepath.Join(d.outside, "infer"), 0o755))
				require.NoError(t, os.Symlink(d.outside, filepath.Join(d.root, "etc")))
			},
			path: "/etc/infer/config.yaml", wantIs: confine.ErrSymlinkEscape,
			untouched: func(d dirs) []string { return []string{filepath.Join(d.outside, "infer")} },
		},
		{
			name: "subdirectory links outside root",
			setup: func(t *testing.T, d dirs) {
				require.NoError(t, os.MkdirAll(filepath.Join(d.root, "etc/infer"), 0o755))
				require.NoError(t, os.Symlink(d.outside, filepath.Join(d.root, "etc/infer/sub")))
			},
			path: "/etc/infer/sub/config.yaml", wantIs: confine.ErrSymlinkEscape,
			untouched: func(d dirs) []string { return []string{d.outside} },
		},
		{
			name: "subdirectory links to a sibling of the allowed dir",
			setup: func(t *testing.T, d dirs) {
				require.NoError(t, os.MkdirAll(filepath.Join(d.root, "etc/infer"), 0o755))
				require.NoError(t, os.MkdirAll(filepath.Join(d.root, "etc/other"), 0o755))
				require.NoError(t, os.Symlink("../other", filepath.Join(d.root, "etc/infer/sub")))
			},
			path: "/etc/infer/sub/config.yaml", wantIs: confine.ErrSymlinkEscape,
			untouched: func(d dirs) []string { return []string{filepath.Join(d.root, "etc/other")} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			drv, root := newDriver(t)
			d := dirs{root: root, outside: t.TempDir()}
			tt.setup(t, d)
			before := tree(t, root)

			err := writeFile(t, drv, tt.path, "pwned", "")
			require.ErrorIs(t, err, tt.wantIs)
			_, err = drv.Observe(context.Background(), planner.FileID(tt.path), nil)
			require.ErrorIs(t, err, tt.wantIs)
			err = drv.Apply(context.Background(), deleteAction(tt.path), nil)
			require.ErrorIs(t, err, tt.wantIs)

			require.Equal(t, before, tree(t, root), "nothing may be written under root")
			for _, dir := range append(tt.untouched(d), d.outside) {
				entries, err := os.ReadDir(dir)
				require.NoError(t, err)
				if dir == d.outside && len(entries) == 1 && entries[0].Name() == "infer" {
					entries, _ = os.ReadDir(filepath.Join(dir, "infer"))
				}
				require.Empty(t, entries, "nothing may be written to %s", dir)
			}
		})
	}
}

func TestSymlinkAtFilePathIsReplaced(t *testing.T) {
	drv, root := newDriver(t)
	outside := t.TempDir()
	target := filepath.Join(outside, "target")
	require.NoError(t, os.WriteFile(target, []byte("original"), 0o600))
	dir := filepath.Join(root, testAllow)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	link := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.Symlink(target, link))

	st, err := drv.Observe(context.Background(), "file/etc/infer/config.yaml", nil)
	require.NoError(t, err)
	require.Equal(t, "<symlink>", st.Fields[0].Value)

	require.NoError(t, writeFile(t, drv, "/etc/infer/config.yaml", "declared", "0644"))
	fi, err := os.Lstat(link)
	require.NoError(t, err)
	require.True(t, fi.Mode().IsRegular(), "the symlink itself is replaced")
	got, err := os.ReadFile(link)
	require.NoError(t, err)
	require.Equal(t, "declared", string(got))

	got, err = os.ReadFile(target)
	require.NoError(t, err)
	require.Equal(t, "original", string(got), "the symlink's target is untouched")
	require.Equal(t, os.FileMode(0o600), perm(t, target))
}

func TestDirectoryAtFilePath(t *testing.T) {
	drv, root := newDriver(t)
	node := filepath.Join(root, "etc/infer/config.yaml")
	require.NoError(t, os.MkdirAll(filepath.Join(node, "keep"), 0o755))

	err := writeFile(t, drv, "/etc/infer/config.yaml", "x", "")
	require.ErrorIs(t, err, confine.ErrNotRegular)
	require.ErrorContains(t, err, node+" is a directory")
	require.DirExists(t, filepath.Join(node, "keep"))
	require.Empty(t, tempFiles(t, root))
}

func TestSymlinkInsideAllowedDirIsFollowed(t *testing.T) {
	drv, root := newDriver(t)
	dir := filepath.Join(root, testAllow)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "v2"), 0o755))
	require.NoError(t, os.Symlink("v2", filepath.Join(dir, "current")))

	require.NoError(t, writeFile(t, drv, "/etc/infer/current/config.yaml", "x", ""))
	require.FileExists(t, filepath.Join(dir, "v2/config.yaml"))
	st, err := drv.Observe(context.Background(), "file/etc/infer/current/config.yaml", nil)
	require.NoError(t, err)
	require.True(t, st.Exists)
	require.Equal(t, "0644", st.Fields[1].Value)
}

func TestAllowedRoot(t *testing.T) {
	root := t.TempDir()
	drv := newDriverAt(t, root, []string{"/"})
	require.NoError(t, writeFile(t, drv, "/etc/x.conf", "x", ""))
	require.FileExists(t, filepath.Join(root, "etc/x.conf"))
	require.ErrorIs(t, writeFile(t, drv, "/../x", "x", ""), confine.ErrInvalidPath)
}
