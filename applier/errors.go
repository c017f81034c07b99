package applier

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns that one of these
// describes wraps it, so callers can branch with errors.Is. None of them is
// worth retrying before the manifest or the node changes.
var (
	// ErrCorruptInventory: the inventory file cannot be read.
	ErrCorruptInventory = errors.New("corrupt inventory")
	// ErrInventoryMismatch: the inventory in stateDir was written for
	// another root or another device.
	ErrInventoryMismatch = errors.New("inventory mismatch")
)

// LockedError says another tend holds the lock on the state directory.
type LockedError struct {
	PID      int // 0 when the holder has not written its pid yet
	StateDir string
	LockFile string
	Agent    bool // the holder is an agent, which holds it while it runs
}

func (e *LockedError) Error() string {
	pid := "pid unknown"
	if e.PID > 0 {
		pid = fmt.Sprintf("pid %d", e.PID)
	}
	if e.Agent {
		return fmt.Sprintf("another tend agent (%s) runs on %s (lock %s): one agent per state directory; stop it first", pid, e.StateDir, e.LockFile)
	}
	return fmt.Sprintf("another tend (%s) is using %s (lock %s); wait for it to finish or stop it", pid, e.StateDir, e.LockFile)
}
