package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// gcHeadroom is how much the memory of a one-shot apply may grow before
// its first garbage collection.
const gcHeadroom = 16 << 20

// deferGC holds off the garbage collector of a one-shot command until the
// memory the runtime uses has grown by gcHeadroom, and then gives the
// collector back its settings: a no-op tend apply allocates about 2 MB
// after its packages are initialised, a cold apply of a small model about
// 6 MB (its download buffers), most of it in use until the process exits,
// and each collection before that only costs CPU. A long download
// collects as before once past the headroom. The limit that triggers the
// first collection is the documented GOGC=off with GOMEMLIMIT; setting
// either variable keeps the runtime's behaviour as it is.
func deferGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return
	}
	used := s[0].Value.Uint64() - s[1].Value.Uint64()
	percent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(int64(used + gcHeadroom))
	// The first collection finds the sentinel unreachable and runs its
	// cleanup.
	sentinel := new([64]byte)
	runtime.AddCleanup(sentinel, func(struct{}) {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}, struct{}{})
}
