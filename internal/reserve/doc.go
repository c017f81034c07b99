// Package reserve keeps a preallocated file in stateDir that the agent
// deletes when a tick fails because the disk is full, so that the tick
// run again has room for its lock, records and the files it reverts,
// and takes back once the filesystem has room again: drift is still
// reverted on a disk another writer filled.
package reserve
