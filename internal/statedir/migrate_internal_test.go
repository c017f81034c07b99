package statedir

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A migration a crash cut short is taken up again: a copy that was being
// built is built again from the files (none was rewritten yet); a copy
// that was complete is kept as it is (the files as they were, not as the
// first migration left them), and the files left are rewritten.
func TestMigrateAfterCrash(t *testing.T) {
	for _, crash := range []string{"while copying", "while rewriting"} {
		t.Run(crash, func(t *testing.T) {
			d := Dir(filepath.Join(t.TempDir(), "state"))
			require.NoError(t, os.CopyFS(string(d), os.DirFS("testdata/format1")))
			orig := ReadTree(t, string(d))
			files, err := d.versioned()
			require.NoError(t, err)
			require.Greater(t, len(files), 10)

			switch crash {
			case "while copying":
				part := d.formatCopyPartial(1)
				require.NoError(t, os.MkdirAll(filepath.Join(part, "services"), 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(part, "services", "half"), []byte("{"), 0o600))
			case "while rewriting":
				require.NoError(t, d.keepCopy(1, files, false))
				for _, rel := range files[:len(files)/2] {
					require.NoError(t, d.upgradeFile(rel))
				}
				require.NotEqual(t, orig, ReadTree(t, string(d)))
			}
			mig, err := d.Migrate("v2", "c")
			require.NoError(t, err)
			require.Equal(t, Migration{From: 1, Copy: d.FormatCopy(1)}, mig)

			copied := ReadTree(t, d.FormatCopy(1))
			require.Len(t, copied, len(files))
			for _, rel := range files {
				require.Equal(t, orig[rel], copied[rel], "%s: the copy holds the file as it was", rel)
				b, err := os.ReadFile(filepath.Join(string(d), rel))
				require.NoError(t, err)
				n, err := formatOf(filepath.Base(rel), b)
				require.NoError(t, err)
				require.Equal(t, Format, n, rel)
			}
			_, err = os.Stat(d.formatCopyPartial(1))
			require.ErrorIs(t, err, fs.ErrNotExist, "no partial copy is left")
		})
	}
}

// verdict.json carries the format: a migration would rewrite it.
func TestVersionedHasTheVerdict(t *testing.T) {
	d := Dir(t.TempDir())
	require.NoError(t, WriteJSON(string(d), VerdictFile, map[string]string{"revision": "r"}, 0o644))
	files, err := d.versioned()
	require.NoError(t, err)
	require.Equal(t, []string{VerdictFile}, files)
}
