package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/tend-dev/tend/internal/statedir"
)

// DefaultLockTimeout is how long a tend waits for another that holds the
// stateDir lock before giving up.
const DefaultLockTimeout = time.Minute

// LockWithin takes the stateDir lock as Lock does, waiting at most timeout
// (zero: DefaultLockTimeout) for another tend that holds it. A wait cut
// short by ctx (an interrupt, the agent shutting down) returns ctx's
// error: no second tend is to blame.
func LockWithin(ctx context.Context, stateDir string, timeout time.Duration) (unlock func() error, err error) {
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	lockCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	unlock, err = Lock(lockCtx, stateDir)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return unlock, err
}

// StateOptions are what a command that changes the stateDir outside a
// reconcile (tend retry, tend state restore) needs to lock it.
type StateOptions struct {
	// LockTimeout bounds the wait for another tend that holds the
	// stateDir lock; zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// Version and Commit are this tend's, written in the format marker
	// when the stateDir is migrated (statedir.Dir.Migrate).
	Version, Commit string
}

// lockState takes the locks of a command that changes stateDir outside a
// reconcile, and returns what lets them go. With noAgent (what the
// command does, "restore"), no agent may run on stateDir: the agent lock
// is taken first, without waiting, and held with the stateDir lock; a
// running agent is refused, naming its pid. Otherwise an agent may run,
// and once the stateDir lock is held the stateDir is brought to this
// tend's format (MigrateState, which holds the agent lock while it
// migrates): this tend reads and writes its own format only.
func lockState(ctx context.Context, stateDir string, o StateOptions, noAgent string) (unlock func() error, err error) {
	unlockAgent := func() error { return nil }
	if noAgent != "" {
		unlockAgent, err = LockAgent(stateDir)
		if locked := (*LockedError)(nil); errors.As(err, &locked) {
			return nil, fmt.Errorf("an agent runs on %s (pid %d): stop it first (systemctl stop tend), then %s", stateDir, locked.PID, noAgent)
		} else if err != nil {
			return nil, err
		}
	}
	unlockState, err := LockWithin(ctx, stateDir, o.LockTimeout)
	if err != nil {
		_ = unlockAgent()
		return nil, err
	}
	unlock = func() error { return errors.Join(unlockState(), unlockAgent()) }
	if noAgent == "" {
		if err := MigrateState(stateDir, o.Version, o.Commit, nil); err != nil {
			_ = unlock()
			return nil, err
		}
	}
	return unlock, nil
}

// Retry forgets the quarantine of key (see Unquarantine) for tend retry,
// under the stateDir lock (see StateOptions), and returns what it forgot.
// A stateDir without a quarantine is left as it is: no lock is taken and
// no stateDir made.
func Retry(ctx context.Context, stateDir, key string, o StateOptions) ([]Quarantined, error) {
	if _, err := os.Stat(statedir.Dir(stateDir).Quarantine()); err != nil {
		return Unquarantine(stateDir, key) // nothing to change
	}
	unlock, err := lockState(ctx, stateDir, o, "")
	if err != nil {
		return nil, err
	}
	defer unlock()
	return Unquarantine(stateDir, key)
}

// RestoreState puts back the newest copy a migration kept in stateDir
// (statedir.Dir.RestoreFormatCopy) for tend state restore, with no agent
// running and under the stateDir lock, and returns its format and the
// files removed.
func RestoreState(ctx context.Context, stateDir string, o StateOptions) (int, []string, error) {
	d := statedir.Dir(stateDir)
	n, _, err := d.ReadMarker()
	if err != nil {
		return 0, nil, err
	}
	from := 0
	for f := statedir.Format - 1; f >= 1; f-- {
		if _, err := os.Stat(d.FormatCopy(f)); err == nil {
			from = f
			break
		}
	}
	if from == 0 { // a copy is there after a migration that a crash cut short too
		return 0, nil, fmt.Errorf("%s holds no copy to restore (it is in state format %d): a copy is kept from a migration until the first apply "+
			"that succeeds after it; a tend of an older format cannot run on this stateDir: keep this tend, or give the older one a new stateDir", stateDir, n)
	}
	unlock, err := lockState(ctx, stateDir, o, "restore")
	if err != nil {
		return 0, nil, err
	}
	defer unlock()
	removed, err := d.RestoreFormatCopy(from)
	return from, removed, err
}

// MigrateState brings stateDir, if it is in an older format, to this
// tend's (see statedir.Dir.Migrate), version and commit being this tend's;
// the caller holds the stateDir lock. It holds the agent lock while it
// migrates (the caller's own, when it is the agent): an agent of another
// process on the stateDir reads the files it wrote (an older tend's), so
// then nothing is migrated and the caller is refused, saying to stop or
// upgrade that agent first. A stateDir in a newer format is a
// *statedir.NewerError. A migration is logged on log when it is not nil.
func MigrateState(stateDir, version, commit string, log *slog.Logger) error {
	d := statedir.Dir(stateDir)
	n, m, err := d.ReadMarker()
	if err != nil || n == statedir.Format {
		return err
	}
	if n > statedir.Format {
		return &statedir.NewerError{Path: d.Format(), Format: n, Tend: m.Tend, Commit: m.Commit}
	}
	unlock, err := LockAgent(stateDir)
	var locked *LockedError
	switch {
	case errors.As(err, &locked) && locked.PID == os.Getpid():
		// This process is the agent, and holds the lock.
	case errors.As(err, &locked):
		return fmt.Errorf("%s is in state format %d and an agent runs on it (pid %d), whose tend reads it as it is: "+
			"stop it, or restart it with this tend, which migrates the state to format %d as it starts; then run this again",
			stateDir, n, locked.PID, statedir.Format)
	case err != nil:
		return err
	default:
		defer unlock()
	}
	mig, err := d.Migrate(version, commit)
	if err != nil || log == nil || mig.From == statedir.Format {
		return err
	}
	if mig.Copy == "" {
		log.Info("state format marked", logKeyStateDir, stateDir, logKeyTo, statedir.Format)
	} else {
		log.Info("state migrated", logKeyStateDir, stateDir, logKeyFrom, mig.From, logKeyTo, statedir.Format, logKeyCopy, mig.Copy)
	}
	return nil
}
