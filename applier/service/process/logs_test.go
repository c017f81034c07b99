//go:build linux

package process

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
)

// spamLine is the form of svc -spam's lines; the digits vary.
var spamLine = "line 00000000 " + strings.Repeat("x", 40)

// isSpamPrefix: s is the start of a spamLine.
func isSpamPrefix(s string) bool {
	if len(s) > len(spamLine) {
		return false
	}
	for i := range len(s) {
		if (i >= 5 && i < 13 && (s[i] < '0' || s[i] > '9')) || ((i < 5 || i >= 13) && s[i] != spamLine[i]) {
			return false
		}
	}
	return true
}

// lineNumbers reads the numbers of svc -spam's lines in a log file, failing
// on any line that is not whole, except the last of a copy: copytruncate may
// cut it (the rest is lost with the truncation).
func lineNumbers(t *testing.T, path string, copied bool) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotContains(t, string(b), "\x00", "%s: a hole where the process wrote past a truncation", path)
	lines := strings.Split(string(b), "\n")
	if tail := lines[len(lines)-1]; tail != "" {
		require.True(t, copied, "%s: the live file ends in a partial line %q", path, tail)
		require.True(t, isSpamPrefix(tail), "%s: last line %q", path, tail)
	}
	var nums []int
	for _, l := range lines[:len(lines)-1] {
		var n int
		var rest string
		_, err := fmt.Sscanf(l, "line %08d %s", &n, &rest)
		require.NoError(t, err, "%s: %q", path, l)
		require.Equal(t, strings.Repeat("x", 40), rest, "%s: %q", path, l)
		nums = append(nums, n)
	}
	return nums
}

func TestRotateLogWhileAppending(t *testing.T) {
	t.Parallel()
	e := newTestRuntime(t)
	log := filepath.Join(t.TempDir(), "logs", "spam.log")
	p := start(t, e, Instance{Service: "spam", Command: []string{svcBin, "-spam", "1s"}, LogFile: log})

	const max, keep = 32 << 10, 3
	done := make(chan struct{})
	go func() { _, _ = e.Wait(waitCtx(t), p); close(done) }()
	rotations := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(5 * time.Millisecond):
		}
		before, _ := os.Stat(log)
		require.NoError(t, service.RotateLog(log, max, keep))
		if after, _ := os.Stat(log); before != nil && before.Size() > max && after.Size() < before.Size() {
			rotations++
		}
	}
	require.Greater(t, rotations, keep, "the test must rotate more often than it keeps copies")

	// Oldest first: .3, .2, .1, the live file; within and across files
	// the lines go up.
	last := -1
	for i := keep; i >= 0; i-- {
		p := log
		if i > 0 {
			p += "." + strconv.Itoa(i)
		}
		nums := lineNumbers(t, p, i > 0)
		if i > 0 {
			require.NotEmpty(t, nums, p) // the live file may be just truncated
		}
		for _, n := range nums {
			require.Greater(t, n, last, "%s: line %d after %d", p, n, last)
			last = n
		}
	}
	assert.NoFileExists(t, log+"."+strconv.Itoa(keep+1))
	assert.NoFileExists(t, log+".1.tmp")
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
