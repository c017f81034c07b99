package applier

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

func TestFileID(t *testing.T) {
	require.Equal(t, "file/etc/infer/config.yaml", FileID("/etc/infer/config.yaml"))
	require.Equal(t, "/etc/infer/config.yaml", FilePath("file/etc/infer/config.yaml"))
}

func TestFileResource(t *testing.T) {
	const helloDigest = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	tests := []struct {
		name string
		mode string
		want string
	}{
		{"default mode", "", "0644"},
		{"four digits", "0600", "0600"},
		{"three digits", "755", "0755"},
		{"setuid", "4755", "4755"},
		{"invalid kept as written", "rw-r--r--", "rw-r--r--"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := FileResource(manifest.File{Path: "/etc/infer/a", Content: "hello", Mode: tt.mode})
			require.Equal(t, planner.Resource{
				ID:   "file/etc/infer/a",
				Kind: planner.KindFile,
				Fields: []planner.Field{
					{Name: "content", Value: helloDigest},
					{Name: "mode", Value: tt.want},
				},
			}, r)
		})
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in      string
		wantErr bool
	}{
		{"0644", false}, {"0000", false}, {"7777", false}, {"17777", true}, {"0648", true}, {"-1", true}, {"abc", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			m, err := parseMode(tt.in)
			if tt.wantErr {
				require.ErrorContains(t, err, "invalid file mode")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.in, formatMode(m))
		})
	}
}
