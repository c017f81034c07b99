// Package flock takes and releases the advisory lock of an open file:
// flock(2) on Unix, LockFileEx on one byte far past the end on Windows (so
// that there too the lock guards no content). The stateDir lock, a
// replica's lock and atomicfile's writers take it. Probe asks, without
// taking it, whether another process holds a file's lock, and which
// (from /proc/locks, on Linux): a service's update lock. It is a helper
// of those stages, not a stage of the flow.
package flock
