package agent

import (
	"context"
	"log/slog"

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
// applier.MigrateState); the caller holds the stateDir lock. An agent of
// another process on the stateDir still reads the old format (a newer one
// would have migrated it): the migration waits for that agent to be
// upgraded, and the apply is refused, saying so.
func (r *Reconciler) migrateState(log *slog.Logger) error {
	return applier.MigrateState(r.Config.StateDir, r.Version, r.Commit, log)
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
