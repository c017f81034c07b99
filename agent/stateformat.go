package agent

import (
	"context"
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
// the caller holds the stateDir lock. An agent of another process on
// the stateDir still reads the old format (a newer one would have
// migrated it): then nothing is migrated and the caller is refused,
// saying to upgrade that agent first.
func MigrateState(stateDir, version, commit string, log *slog.Logger) error {
	d := statedir.Dir(stateDir)
	n, _, err := d.ReadMarker()
	if err != nil || n == statedir.Format {
		return err
	}
	if pid, running, err := applier.AgentRunning(stateDir); err != nil {
		return err
	} else if running && pid != os.Getpid() {
		return fmt.Errorf("%s is in state format %d and an agent of an older tend runs on it (pid %d), which reads no other: "+
			"restart the agent with this tend first (it migrates the state to format %d), or use the agent's tend",
			stateDir, n, pid, statedir.Format)
	}
	from, err := d.Migrate(version, commit)
	if err != nil {
		return err
	}
	if from != statedir.Format && log != nil {
		log.Info("state migrated", keyStateDir, stateDir, keyFrom, from, keyTo, statedir.Format,
			keyCopy, d.FormatCopy(from))
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
