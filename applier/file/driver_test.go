package file

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

func TestFileDriverWrite(t *testing.T) {
	withUmask(t, 0o077) // a restrictive umask must not change any mode
	tests := []struct {
		name     string
		path     string
		before   string // existing content, "" for none
		content  string
		mode     string
		wantMode fs.FileMode
	}{
		{name: "create with default mode", path: "/etc/infer/config.yaml", content: "threshold: 0.4\n", wantMode: 0o644},
		{name: "create with explicit mode", path: "/etc/infer/secret", content: "s3cret", mode: "0600", wantMode: 0o600},
		{name: "create in new subdirectories", path: "/etc/infer/a/b/run.sh", content: "#!/bin/sh\n", mode: "0755", wantMode: 0o755},
		{name: "create setuid", path: "/etc/infer/suid", content: "x", mode: "4750", wantMode: 0o750 | fs.ModeSetuid},
		{name: "create empty file", path: "/etc/infer/empty", content: "", wantMode: 0o644},
		{name: "update content", path: "/etc/infer/config.yaml", before: "old", content: "new", wantMode: 0o644},
		{name: "update mode only", path: "/etc/infer/config.yaml", before: "same", content: "same", mode: "0640", wantMode: 0o640},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, root := newDriver(t)
			ctx := context.Background()
			if tt.before != "" {
				require.NoError(t, writeFile(t, d, tt.path, tt.before, "0666"))
			}
			require.NoError(t, writeFile(t, d, tt.path, tt.content, tt.mode))

			node := filepath.Join(root, tt.path)
			got, err := os.ReadFile(node)
			require.NoError(t, err)
			require.Equal(t, tt.content, string(got))
			require.Equal(t, tt.wantMode, perm(t, node))
			for dir := filepath.Dir(node); dir != root; dir = filepath.Dir(dir) {
				require.Equal(t, fs.FileMode(0o755), perm(t, dir), "mode of %s", dir)
			}
			require.Empty(t, tempFiles(t, root), "temporary files left behind")

			st, err := d.Observe(ctx, planner.FileID(tt.path), nil)
			require.NoError(t, err)
			mode, err := render.ParseMode(tt.mode)
			require.NoError(t, err)
			require.Equal(t, planner.State{Exists: true, Fields: []planner.Field{
				{Name: planner.FieldContent, Value: render.ContentDigest([]byte(tt.content))},
				{Name: planner.FieldMode, Value: render.FormatMode(mode)},
			}}, st)
		})
	}
}

func TestFileDriverDelete(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, node string)
		wantGone bool
	}{
		{"regular file", func(t *testing.T, node string) {
			require.NoError(t, os.WriteFile(node, []byte("x"), 0o644))
		}, true},
		{"missing file", func(t *testing.T, node string) {}, true},
		{"directory is left alone", func(t *testing.T, node string) {
			require.NoError(t, os.Mkdir(node, 0o755))
		}, false},
		{"symlink is left alone", func(t *testing.T, node string) {
			require.NoError(t, os.Symlink("/nonexistent", node))
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, root := newDriver(t)
			dir := filepath.Join(root, testAllow)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			node := filepath.Join(dir, "config.yaml")
			tt.setup(t, node)

			require.NoError(t, d.Apply(context.Background(), deleteAction("/etc/infer/config.yaml"), nil))
			_, err := os.Lstat(node)
			require.Equal(t, tt.wantGone, os.IsNotExist(err), "lstat: %v", err)
		})
	}
	t.Run("missing allowed directory", func(t *testing.T) {
		d, root := newDriver(t)
		require.NoError(t, d.Apply(context.Background(), deleteAction("/etc/infer/config.yaml"), nil))
		require.Empty(t, tree(t, root))
	})
}

func TestFileDriverObserve(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, node string)
		want  planner.State
	}{
		{"missing", func(t *testing.T, node string) {}, planner.State{}},
		{"regular file", func(t *testing.T, node string) {
			require.NoError(t, os.WriteFile(node, []byte("hello"), 0o600))
			require.NoError(t, os.Chmod(node, 0o640))
		}, planner.State{Exists: true, Fields: []planner.Field{
			{Name: "content", Value: "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"},
			{Name: "mode", Value: "0640"},
		}}},
		{"symlink is not followed", func(t *testing.T, node string) {
			target := filepath.Join(filepath.Dir(node), "target")
			require.NoError(t, os.WriteFile(target, []byte("hello"), 0o644))
			require.NoError(t, os.Symlink("target", node))
		}, planner.State{Exists: true, Fields: []planner.Field{
			{Name: "content", Value: "<symlink>"}, {Name: "mode", Value: "0777"},
		}}},
		{"directory", func(t *testing.T, node string) {
			require.NoError(t, os.Mkdir(node, 0o700))
			require.NoError(t, os.Chmod(node, 0o755))
		}, planner.State{Exists: true, Fields: []planner.Field{
			{Name: "content", Value: "<directory>"}, {Name: "mode", Value: "0755"},
		}}},
		{"parent is a file", func(t *testing.T, node string) {
			require.NoError(t, os.WriteFile(filepath.Dir(node), nil, 0o644))
		}, planner.State{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, root := newDriver(t)
			node := filepath.Join(root, "etc/infer/sub/config.yaml")
			require.NoError(t, os.MkdirAll(filepath.Join(root, "etc/infer"), 0o755))
			if tt.name != "parent is a file" {
				require.NoError(t, os.MkdirAll(filepath.Dir(node), 0o755))
			}
			tt.setup(t, node)
			st, err := d.Observe(context.Background(), "file/etc/infer/sub/config.yaml", nil)
			require.NoError(t, err)
			if tt.name == "directory" {
				// The plan says the write will fail, before anything runs.
				require.Equal(t, node+" is a directory; tend replaces files and symlinks, never directories: remove it or declare another path", st.Blocked)
				st.Blocked = ""
			}
			require.Equal(t, tt.want, st)
		})
	}
	t.Run("creates nothing", func(t *testing.T) {
		d, root := newDriver(t)
		st, err := d.Observe(context.Background(), "file/etc/infer/a/b", nil)
		require.NoError(t, err)
		require.False(t, st.Exists)
		require.Empty(t, tree(t, root))
	})
}

func TestFileDriverApplyErrors(t *testing.T) {
	d, _ := newDriver(t)
	ctx := context.Background()
	a := createAction("/etc/infer/a")
	require.ErrorContains(t, d.Apply(ctx, a, "not a file"), "want a render.File")
	require.ErrorContains(t, d.Apply(ctx, a, render.File{Path: "/etc/infer/b"}), "spec declares file/etc/infer/b")
	a.Type = planner.Restart
	require.ErrorContains(t, d.Apply(ctx, a, nil), "a file cannot restart")
	require.NoError(t, d.Apply(ctx, createAction("/etc/infer/p"), render.File{Path: "/etc/infer/p", Mode: 0o644}))

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, d.Apply(cctx, createAction("/etc/infer/q"), render.File{Path: "/etc/infer/q"}), context.Canceled)
}

func TestFileDriverDeletePrunesEmptyFolders(t *testing.T) {
	tests := []struct {
		name  string
		allow []string
		files []string          // regular files on the node before
		setup func(root string) // more to set up, or nil
		del   string
		want  []string // tree after, relative to root
	}{
		{name: "deep path", files: []string{"/etc/infer/a/b/c/f"}, del: "/etc/infer/a/b/c/f",
			want: []string{"etc", "etc/infer"}},
		{name: "file in the allowed dir", files: []string{"/etc/infer/f"}, del: "/etc/infer/f",
			want: []string{"etc", "etc/infer"}},
		{name: "sibling keeps its folder", files: []string{"/etc/infer/a/b/f", "/etc/infer/a/g"}, del: "/etc/infer/a/b/f",
			want: []string{"etc", "etc/infer", "etc/infer/a", "etc/infer/a/g"}},
		{name: "empty sibling folder keeps its parent", files: []string{"/etc/infer/a/b/f"}, del: "/etc/infer/a/b/f",
			setup: func(root string) { _ = os.Mkdir(filepath.Join(root, "etc/infer/a/c"), 0o755) },
			want:  []string{"etc", "etc/infer", "etc/infer/a", "etc/infer/a/c"}},
		{name: "nested allowed dir is kept", allow: []string{"/etc/infer", "/etc/infer/sub"},
			files: []string{"/etc/infer/sub/d/f"}, del: "/etc/infer/sub/d/f",
			want: []string{"etc", "etc/infer", "etc/infer/sub"}},
		{name: "allowed dir at root is kept", allow: []string{"/"}, files: []string{"/a/b/f"}, del: "/a/b/f",
			want: nil},
		{name: "symlinked folder is kept", files: []string{"/etc/infer/v2/sub/f"}, del: "/etc/infer/cur/sub/f",
			setup: func(root string) { _ = os.Symlink("v2", filepath.Join(root, "etc/infer/cur")) },
			want:  []string{"etc", "etc/infer", "etc/infer/cur", "etc/infer/v2"}},
		{name: "missing file prunes nothing", files: []string{"/etc/infer/a/g"}, del: "/etc/infer/a/b/f",
			setup: func(root string) { _ = os.Mkdir(filepath.Join(root, "etc/infer/a/b"), 0o755) },
			want:  []string{"etc", "etc/infer", "etc/infer/a", "etc/infer/a/b", "etc/infer/a/g"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			allow := tt.allow
			if allow == nil {
				allow = []string{testAllow}
			}
			d := newDriverAt(t, root, allow)
			for _, f := range tt.files {
				require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte("x"), 0o644))
			}
			if tt.setup != nil {
				tt.setup(root)
			}
			require.NoError(t, d.Apply(context.Background(), deleteAction(tt.del), nil))
			require.Equal(t, tt.want, tree(t, root))
		})
	}
}

// After an apply, the temporary files killed writes left in the folders
// of declared files are gone, whichever file they were for (one no longer
// declared included); a file of someone else's with a similar name and a
// deleted file's leftover temporary file are handled too.
func TestFinishRemovesLeftTemps(t *testing.T) {
	d, root := newDriver(t)
	require.NoError(t, writeFile(t, d, "/etc/infer/config.yaml", "x", ""))
	require.NoError(t, writeFile(t, d, "/etc/infer/old.yaml", "x", ""))
	dir := filepath.Join(root, "etc/infer")
	put := func(name string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("half"), 0o600))
	}
	put(atomicfile.TempName("config.yaml"))
	put(atomicfile.TempName("dropped.yaml"))
	put(atomicfile.TempName("old.yaml"))
	put(".tend-mine")

	require.NoError(t, d.Apply(context.Background(), deleteAction("/etc/infer/old.yaml"), nil))
	require.NoError(t, d.Finish(context.Background(), map[string]any{planner.FileID("/etc/infer/config.yaml"): nil}))
	require.ElementsMatch(t, []string{"config.yaml", ".tend-mine"}, names(t, dir))
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
