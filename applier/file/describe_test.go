package file

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

func TestDescribe(t *testing.T) {
	ctx := context.Background()
	d, root := newDriver(t)
	p := "/etc/infer/config.yaml"
	id := planner.FileID(p)
	require.NoError(t, writeFile(t, d, p, "threshold: 0.4\n", ""))

	t.Run("reads a file's content", func(t *testing.T) {
		c, err := d.Describe(ctx, id, render.File{Path: p})
		require.NoError(t, err)
		require.Equal(t, planner.Content{Data: []byte("threshold: 0.4\n"), Size: 15}, c)
	})
	t.Run("never reads a sensitive one", func(t *testing.T) {
		c, err := d.Describe(ctx, id, render.File{Path: p, Sensitive: true})
		require.NoError(t, err)
		require.Equal(t, planner.Content{Size: 15, Sensitive: true}, c)
	})
	t.Run("reads nothing of a file too large to diff", func(t *testing.T) {
		big := "/etc/infer/big.bin"
		require.NoError(t, writeFile(t, d, big, strings.Repeat("x", planner.MaxDiffBytes+1), ""))
		c, err := d.Describe(ctx, planner.FileID(big), nil)
		require.NoError(t, err)
		require.Empty(t, c.Data)
		require.Equal(t, int64(planner.MaxDiffBytes+1), c.Size)
		require.True(t, c.Partial())
	})
	t.Run("nothing at the path, or not a file, is empty", func(t *testing.T) {
		c, err := d.Describe(ctx, planner.FileID("/etc/infer/missing"), nil)
		require.NoError(t, err)
		require.Equal(t, planner.Content{}, c)
		require.NoError(t, os.Symlink("/etc/shadow", filepath.Join(root, "etc/infer/link")))
		c, err = d.Describe(ctx, planner.FileID("/etc/infer/link"), nil)
		require.NoError(t, err)
		require.Empty(t, c.Data, "a symlink is never followed")
	})
}
