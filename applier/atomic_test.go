package applier

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestWriteLongName(t *testing.T) {
	tests := []struct {
		name string
		base string
	}{
		{"ascii, 250 bytes", strings.Repeat("a", 250)},
		{"two-byte runes, 250 bytes", strings.Repeat("é", 125)},
		{"four-byte runes, 252 bytes", strings.Repeat("🦀", 63)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, root := newDriver(t)
			p := "/etc/infer/" + tt.base
			require.NoError(t, writeFile(t, d, p, "long", ""))
			require.NoError(t, writeFile(t, d, p, "longer", ""), "update over the existing file")
			got, err := os.ReadFile(filepath.Join(root, p))
			require.NoError(t, err)
			require.Equal(t, "longer", string(got))
			require.Empty(t, tempFiles(t, root))
		})
	}
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
	require.Less(t, len(tempPrefix)+tempBaseMax+1+12, 255, "a temporary name fits any file system")
}
