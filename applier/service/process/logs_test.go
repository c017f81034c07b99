//go:build linux

package process

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
)

// The shim rotates the file at the cap while the service writes, keeps
// three copies, and loses nothing in between: the files, oldest first,
// hold consecutive lines (the oldest copy may start inside the line whose
// start was dropped with the copy before it).
func TestLogShimRotatesWhileWriting(t *testing.T) {
	t.Parallel()
	e := newTestRuntime(t)
	const max, keep = 32 << 10, service.LogKeep
	e.logMax = max
	log := filepath.Join(t.TempDir(), "logs", "spam.log")
	p := start(t, e, Instance{Service: "spam", Command: []string{svcBin, "-spam", "1s"}, LogFile: log})
	st, err := e.Wait(waitCtx(t), p)
	require.NoError(t, err)
	require.False(t, st.Failed(), st.String())

	var all strings.Builder
	for i := keep; i >= 0; i-- {
		p := log
		if i > 0 {
			p += "." + strconv.Itoa(i)
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err, "%d rotated copies are kept", keep)
		require.LessOrEqual(t, len(b), max, "%s is over the cap", p)
		if i > 0 {
			require.Greater(t, len(b), max/2, "%s: a copy is rotated near the cap", p)
		}
		all.Write(b)
	}
	assert.NoFileExists(t, log+"."+strconv.Itoa(keep+1))
	assert.NoFileExists(t, log+".next")

	lines := strings.Split(all.String(), "\n")
	require.Empty(t, lines[len(lines)-1], "the service's last line is whole")
	lines = lines[1 : len(lines)-1] // the first may be the end of a dropped line
	last := -1
	for _, l := range lines {
		var n int
		var rest string
		_, err := fmt.Sscanf(l, "line %08d %s", &n, &rest)
		require.NoError(t, err, "%q", l)
		require.Equal(t, strings.Repeat("x", 40), rest, "%q", l)
		if last >= 0 {
			require.Equal(t, last+1, n, "a line lost or out of order")
		}
		last = n
	}
}

func TestRotateLog(t *testing.T) {
	t.Parallel()
	write := func(t *testing.T, p, s string) {
		require.NoError(t, os.WriteFile(p, []byte(s), 0o640))
	}
	t.Run("under the cap: untouched", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "a.log")
		write(t, p, "12345")
		require.NoError(t, service.RotateLog(p, 5, 2))
		assert.Equal(t, "12345", readTrim(t, p))
		assert.NoFileExists(t, p+".1")
	})
	t.Run("missing file", func(t *testing.T) {
		require.NoError(t, service.RotateLog(filepath.Join(t.TempDir(), "none.log"), 5, 2))
	})
	t.Run("shifts and drops the oldest", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "a.log")
		for _, s := range []string{"first-", "second", "third-"} {
			write(t, p, s)
			require.NoError(t, service.RotateLog(p, 5, 2))
			fi, err := os.Stat(p)
			require.NoError(t, err)
			assert.Zero(t, fi.Size())
		}
		assert.Equal(t, "third-", readTrim(t, p+".1"))
		assert.Equal(t, "second", readTrim(t, p+".2"))
		assert.NoFileExists(t, p+".3")
		fi, err := os.Stat(p + ".1")
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	})
	t.Run("keep 0 truncates only", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "a.log")
		write(t, p, "123456")
		require.NoError(t, service.RotateLog(p, 5, 0))
		assert.Empty(t, readTrim(t, p))
		assert.NoFileExists(t, p+".1")
	})
	t.Run("bad arguments", func(t *testing.T) {
		require.Error(t, service.RotateLog("x", 0, 1))
		require.Error(t, service.RotateLog("x", 1, -1))
	})
}
