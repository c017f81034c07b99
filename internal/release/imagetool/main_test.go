package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Bad arguments are refused with what to give instead, and nothing is
// written.
func TestRunRefuses(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tend")
	require.NoError(t, os.WriteFile(bin, []byte("tend"), 0o755))
	out := filepath.Join(dir, "image.tar")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no out", []string{"-version", "v1", "-revision", "c", "-created", "1", "linux/amd64=" + bin}, "no -out: the archive to write"},
		{"bad time", []string{"-out", out, "-version", "v1", "-revision", "c", "-created", "yesterday", "linux/amd64=" + bin},
			`-created "yesterday": want seconds since 1970 (SOURCE_DATE_EPOCH`},
		{"no time", []string{"-out", out, "-version", "v1", "-revision", "c", "linux/amd64=" + bin}, "image: no creation time"},
		{"bad binary", []string{"-out", out, "-version", "v1", "-revision", "c", "-created", "1", bin}, "want PLATFORM=PATH"},
		{"windows", []string{"-out", out, "-version", "v1", "-revision", "c", "-created", "1", "windows/amd64=" + bin},
			"the image is for linux only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorContains(t, run(tc.args), tc.want)
			_, err := os.Stat(out)
			require.True(t, os.IsNotExist(err), "no archive")
		})
	}
	require.NoError(t, run([]string{"-out", out, "-version", "v1", "-revision", "c", "-created", "1", "linux/amd64=" + bin}))
	_, err := os.Stat(out)
	require.NoError(t, err)
}
