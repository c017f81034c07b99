package agent

import (
	"context"
	"os"
	"time"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
)

// Retry forgets the quarantine of commit (a full or abbreviated hash), or
// of every quarantined commit when it is "", so that the next reconcile
// applies it again, and returns what it forgot. It waits for the stateDir
// lock at most lockTimeout (zero: DefaultLockTimeout). A stateDir without
// a quarantine is left as it is.
func Retry(ctx context.Context, stateDir, commit string, lockTimeout time.Duration) ([]applier.Quarantined, error) {
	if _, err := os.Stat(statedir.Dir(stateDir).Quarantine()); err != nil {
		return applier.Unquarantine(stateDir, commit) // nothing to change: no lock, no stateDir made
	}
	r := &Reconciler{Config: &manifest.AgentConfig{StateDir: stateDir}, LockTimeout: lockTimeout}
	unlock, err := r.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return applier.Unquarantine(stateDir, commit)
}
