//go:build linux

package reserve

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTakeAndRelease(t *testing.T) {
	r := New(filepath.Join(t.TempDir(), "reserve"), 1<<20)
	require.False(t, r.Held())
	held, err := r.Take()
	require.NoError(t, err)
	require.True(t, held)
	require.True(t, r.Held())
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(r.Path(), &st))
	require.GreaterOrEqual(t, st.Blocks*512, int64(1<<20), "its blocks are allocated")

	released, err := r.Release()
	require.NoError(t, err)
	require.True(t, released)
	released, err = r.Release()
	require.NoError(t, err)
	require.False(t, released, "nothing left to release")
	require.False(t, r.Held())

	// Not taken where the filesystem lacks twice its size.
	big := New(filepath.Join(t.TempDir(), "reserve"), 1<<50)
	held, err = big.Take()
	require.NoError(t, err)
	require.False(t, held)
	_, err = os.Stat(big.Path())
	require.True(t, errors.Is(err, fs.ErrNotExist))
}
