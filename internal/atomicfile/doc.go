// Package atomicfile writes files the way every durable write of tend is
// made: a temporary file in the same folder, fsync, rename over the target,
// fsync of the folder (left out for a report nothing reads back as state,
// the status document). A crash at any moment leaves the old content or the
// new, never a mix. It also swaps symlinks the same way and reads and writes
// tend's JSON state files; it is support for the applier's drivers, the blob
// store and the agent, not a stage of the flow.
package atomicfile
