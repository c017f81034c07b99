package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/statedir"
)

// checkState reads the stateDir's format marker: a stateDir a newer tend
// wrote is refused (*statedir.NewerError) before anything in it is read
// or changed. An older format is read as it is.
func (r *Reconciler) checkState() error {
	return statedir.Dir(r.Config.StateDir).Check()
}

// migrateState brings an older stateDir to this tend's format (see
// statedir.Dir.Migrate); the caller holds the stateDir lock. An agent of
// another process on the stateDir still reads the old format (a newer one
// would have migrated it): the migration waits for that agent to be
// upgraded, and the apply is refused, saying so.
func (r *Reconciler) migrateState(log *slog.Logger) error {
	return MigrateState(r.Config.StateDir, r.Version, r.Commit, log)
}

// MigrateState brings stateDir, if it is in an older format, to this
// tend's (see statedir.Dir.Migrate), version and commit being this tend's;
// the caller holds the stateDir lock. It holds the agent lock while it
// migrates (the caller's own, when it is the agent): an agent of another
// process on the stateDir reads the files it wrote (an older tend's), so
// then nothing is migrated and the caller is refused, saying to stop or
// upgrade that agent first. A stateDir in a newer format is a
// *statedir.NewerError.
func MigrateState(stateDir, version, commit string, log *slog.Logger) error {
	d := statedir.Dir(stateDir)
	n, m, err := d.ReadMarker()
	if err != nil || n == statedir.Format {
		return err
	}
	if n > statedir.Format {
		return &statedir.NewerError{Path: d.Format(), Format: n, Tend: m.Tend, Commit: m.Commit}
	}
	unlock, err := applier.LockAgent(stateDir)
	var locked *applier.LockedError
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
		log.Info("state format marked", keyStateDir, stateDir, keyTo, statedir.Format)
	} else {
		log.Info("state migrated", keyStateDir, stateDir, keyFrom, mig.From, keyTo, statedir.Format, keyCopy, mig.Copy)
	}
	return nil
}

// migrateOnStart is the agent's migration, before it adopts services: it
// takes the stateDir lock (a one-shot tend may be applying) for the time
// of the migration.
func (r *Reconciler) migrateOnStart(ctx context.Context) error {
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return r.migrateState(r.logger())
}

// dropFormatCopies removes the copy of the old files a migration kept,
// once a tick succeeded on the migrated ones; a failure is logged.
func (r *Reconciler) dropFormatCopies() {
	if err := statedir.Dir(r.Config.StateDir).DropFormatCopies(); err != nil {
		r.logger().Warn("remove the copy of the state before its migration", keyError, err.Error())
	}
}
