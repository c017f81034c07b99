package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// deferGC turns the collector off, with a memory limit to start the first
// collection at, and the first collection gives back the settings it
// found; GOGC set in the environment leaves them alone.
func TestDeferGC(t *testing.T) {
	percent := debug.SetGCPercent(150)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")

	deferGC()
	require.Equal(t, -1, gcPercent(), "collector off")
	require.Less(t, debug.SetMemoryLimit(-1), int64(math.MaxInt64), "a limit starts the first collection")
	restored := false
	for range 100 { // the cleanup runs on its own goroutine after a collection
		runtime.GC()
		runtime.Gosched()
		if restored = gcPercent() == 150; restored {
			break
		}
	}
	require.True(t, restored, "the first collection gives GOGC back")
	require.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1), "and the memory limit")

	t.Setenv("GOGC", "150")
	deferGC()
	require.Equal(t, 150, gcPercent(), "GOGC in the environment wins")
}

// gcPercent is the current GOGC (SetGCPercent returns the one it
// replaces).
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}
