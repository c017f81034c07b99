package hub

import (
	"context"
	"database/sql"
	"fmt"
)

// migration is one version of the schema: its SQL, and PostgreSQL's when
// that differs; then, in the same transaction, what SQL alone cannot do.
type migration struct {
	sql      string
	postgres string // "" when sql serves both
	then     func(ctx context.Context, tx *sql.Tx) error
}

// text is m's SQL in dialect d.
func (m migration) text(d dialect) string {
	if d == postgres && m.postgres != "" {
		return m.postgres
	}
	return m.sql
}

// migrations are the schema's versions, in order: migration i brings the
// schema from version i to i+1. A released migration never changes; a
// change of schema is a new one at the end.
var migrations = []migration{{
	// 1: devices, their tokens, the releases and each device's part in
	// them, and the events derived from successive reports.
	sql: `CREATE TABLE devices (
		name TEXT PRIMARY KEY,
		labels TEXT NOT NULL,
		applied TEXT NOT NULL,
		target TEXT NOT NULL,
		state TEXT NOT NULL,
		held TEXT NOT NULL,
		wave INTEGER NOT NULL,
		last_error TEXT NOT NULL,
		reconciled BIGINT NOT NULL,
		last_seen BIGINT NOT NULL,
		first_seen BIGINT NOT NULL,
		status TEXT NOT NULL
	);
	CREATE TABLE tokens (
		hash TEXT PRIMARY KEY,
		device TEXT NOT NULL,
		created BIGINT NOT NULL
	);
	CREATE INDEX tokens_device ON tokens (device);
	CREATE TABLE releases (
		revision TEXT PRIMARY KEY,
		first_seen BIGINT NOT NULL
	);
	CREATE TABLE device_releases (
		device TEXT NOT NULL,
		revision TEXT NOT NULL,
		state TEXT NOT NULL,
		wave INTEGER NOT NULL,
		first_seen BIGINT NOT NULL,
		applied_at BIGINT NOT NULL,
		PRIMARY KEY (device, revision)
	);
	CREATE INDEX device_releases_revision ON device_releases (revision);
	CREATE TABLE events (
		device TEXT NOT NULL,
		at BIGINT NOT NULL,
		seq INTEGER NOT NULL,
		kind TEXT NOT NULL,
		revision TEXT NOT NULL,
		detail TEXT NOT NULL,
		PRIMARY KEY (device, at, seq)
	);`}, {
	// 2: the services of each device in a crash loop, which rollout
	// brakes count as a failure of the release it runs.
	sql: `ALTER TABLE devices ADD COLUMN crash_loop TEXT NOT NULL DEFAULT ''`}, {
	// 3: releases by key (api.ReleaseKey) instead of revision. See
	// migration3.
	sql: migration3(sqliteKeyOf), postgres: migration3(postgresKeyOf), then: declareMigrated}, {
	// 4: what the hub checks rather than believes (see Hub trust in
	// DESIGN.md).
	//   - devices: the reportSeq of the last report taken (report_epoch,
	//     report_seq), which orders a device's reports instead of its
	//     clock, and the rollout that governs it.
	//   - device_releases, device_parts: the rollout the device was in
	//     when it first took part in the release, so that a verdict counts
	//     only the devices of the asking device's rollout; the indexes a
	//     verdict reads lead with it (devices_wave stays for a verdict
	//     that names no rollout). release_tags is indexed by release, which
	//     trimming a device's releases deletes by.
	//   - webhook_sent: the webhook events posted, by kind and subject,
	//     so that each is sent once across restarts and replicas.
	sql: `ALTER TABLE devices ADD COLUMN report_epoch TEXT NOT NULL DEFAULT '';
	ALTER TABLE devices ADD COLUMN report_seq BIGINT NOT NULL DEFAULT 0;
	ALTER TABLE devices ADD COLUMN rollout TEXT NOT NULL DEFAULT '';
	ALTER TABLE device_releases ADD COLUMN rollout TEXT NOT NULL DEFAULT '';
	ALTER TABLE device_parts ADD COLUMN rollout TEXT NOT NULL DEFAULT '';
	DROP INDEX device_releases_release;
	CREATE INDEX device_releases_release ON device_releases (release_key, rollout, wave, device, state, applied_at);
	DROP INDEX device_parts_part;
	CREATE INDEX device_parts_part ON device_parts (part, rollout, wave, device, state, applied_at);
	CREATE INDEX devices_rollout_wave ON devices (rollout, wave, name, resources_unknown);
	CREATE INDEX release_tags_release ON release_tags (release_key);
	CREATE TABLE webhook_sent (
		kind TEXT NOT NULL,
		subject TEXT NOT NULL,
		at BIGINT NOT NULL,
		PRIMARY KEY (kind, subject)
	);`},
}

// migrate brings the schema to the newest version, each version in one
// transaction. Hub replicas that start at once on PostgreSQL take turns
// through an advisory lock.
func (s *Store) migrate(ctx context.Context) error { return s.migrateTo(ctx, len(migrations)) }

// migrateTo brings the schema to version upTo (tests start from an older
// schema with it).
func (s *Store) migrateTo(ctx context.Context, upTo int) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", s.display, err)
	}
	defer conn.Close()
	if s.dialect == postgres {
		const key = 0x74656e64 // "tend"
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
			return fmt.Errorf("%s: lock for migrations: %w", s.display, err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key) //nolint:errcheck // released with the connection anyway
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("%s: %w", s.display, err)
	}
	var version int
	err = conn.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version)
	switch {
	case err == sql.ErrNoRows:
		if _, err := conn.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return fmt.Errorf("%s: %w", s.display, err)
		}
	case err != nil:
		return fmt.Errorf("%s: read the schema version: %w", s.display, err)
	}
	if version > len(migrations) {
		return fmt.Errorf("%s: schema version %d is newer than this tend knows (%d): run the tend that migrated it, or a newer one", s.display, version, len(migrations))
	}
	for v := version; v < upTo; v++ {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", s.display, err)
		}
		if _, err := tx.ExecContext(ctx, migrations[v].text(s.dialect)); err != nil {
			tx.Rollback() //nolint:errcheck // the error that matters is err
			return fmt.Errorf("%s: migration %d: %w", s.display, v+1, err)
		}
		if then := migrations[v].then; then != nil {
			if err := then(ctx, tx); err != nil {
				tx.Rollback() //nolint:errcheck
				return fmt.Errorf("%s: migration %d: %w", s.display, v+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = $1`, v+1); err != nil {
			tx.Rollback() //nolint:errcheck
			return fmt.Errorf("%s: migration %d: %w", s.display, v+1, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("%s: migration %d: %w", s.display, v+1, err)
		}
	}
	return nil
}
