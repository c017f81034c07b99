package source

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// An unpacked artifact is read as a commit is: names starting with a dot
// (.github/, .old/, .x.yaml) are skipped at any depth below a path, so CI
// (which reads the commit) and a device (which reads the artifact) apply
// the same files.
func TestDirFilesSkipsDotNames(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{
		"devices/cam-017/d.yaml", "devices/cam-017/.old/x.yaml", "devices/cam-017/.hidden.yaml",
		"devices/cam-017/sub/.old/deeper/y.yaml", "devices/cam-017/sub/z.yml", ".github/workflows/ci.yml",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("kind: Device\n"), 0o644))
	}
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	for _, paths := range [][]Path{{{Dir: "devices/cam-017", PerDevice: true}}, {{Dir: ""}}} {
		files, err := DirFiles(root, paths, "oci://registry/fleet:main", "abc")
		require.NoError(t, err)
		var names []string
		for _, f := range files {
			names = append(names, f.Path)
		}
		require.Equal(t, []string{"devices/cam-017/d.yaml", "devices/cam-017/sub/z.yml"}, names, "paths %v", paths)
	}
}
