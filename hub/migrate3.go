package hub

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tend-dev/tend/api"
)

// migration3 is schema 3: releases, and each device's part in them, by
// release key (api.ReleaseKey) instead of revision, so that a model or an
// image digest a policy newly resolved is a release of its own.
//
//   - releases: release_key, the revision it was first seen at, and its
//     resources (JSON of api.ReleaseResource, as the first report
//     that named it as its target sent them; "[]" when none did).
//   - device_releases: by (device, release_key), with the detail of a
//     failure (what was rolled back, and why); indexed by release key and
//     wave, covering what a verdict reads of it.
//   - devices: the keys of the release each runs and works towards, the
//     commit:HASH of the revision it runs (its release's key too, unless
//     that commit changed nothing on it), and the ids of its target's
//     models and services (" model/a service/b "), for the devices that
//     have not reported a digest's release yet, or " * " and
//     resources_unknown 1 when the hub does not know them (see
//     keys.resourceIDs); an index covers what a verdict reads of a
//     device, and another its wave, so that a verdict never reads the
//     device's status document.
//   - device_resources: the same ids, a row each, so that a verdict on a
//     release of digests finds the earlier-wave devices that declare one
//     of its models or services without reading every device. Filled,
//     with resource_ids, from each device's status document (see
//     declareMigrated): a device declares before it reports again.
//   - device_parts: by (device, part), each device's part in each part
//     of a release key (commit:HASH, or one digest, ID@sha256:HEX): failed
//     when it rolled the part back, applied while it runs it (see
//     parts.go); with the device's wave, indexed by part and wave, covering
//     what a verdict reads of it. Empty after the migration: schema 2's
//     releases are commits, whose device_releases rows a verdict counts
//     as before, and each device's next report fills its parts.
//   - release_tags: the tags each release's resources were resolved
//     through, (resource_id, tag, digest, release_key), keyed for finding
//     the digests of a tag (see Store.FindRelease).
//   - events: the key of the release each is about.
//
// Rows of schema 2 are keyed by revision, REF@sha1:HASH: each becomes
// commit:HASH (the key a report of tend v0.1.0 is counted by). Two refs at
// one commit become one release, first seen at the older's revision; a
// device's two parts in it become one: failed before applied before a
// release it works towards before superseded, seen first and applied
// first at the earlier of the two.
//
// keyOf(col) is the SQL of api.RevisionRelease(col) as it stands in
// schema 3; it never changes with that function.
func migration3(keyOf func(col string) string) string {
	return strings.NewReplacer("KEY(revision)", keyOf("revision"), "KEY(applied)", keyOf("applied"), "KEY(target)", keyOf("target")).Replace(`
	CREATE TABLE releases_v3 (
		release_key TEXT PRIMARY KEY,
		revision TEXT NOT NULL,
		resources TEXT NOT NULL,
		first_seen BIGINT NOT NULL
	);
	INSERT INTO releases_v3 (release_key, revision, resources, first_seen)
		SELECT k, revision, '[]', first_seen FROM (
			SELECT KEY(revision) AS k, revision, first_seen,
				ROW_NUMBER() OVER (PARTITION BY KEY(revision) ORDER BY first_seen, revision) AS n
			FROM releases) t
		WHERE n = 1;
	DROP TABLE releases;
	ALTER TABLE releases_v3 RENAME TO releases;
	CREATE TABLE device_releases_v3 (
		device TEXT NOT NULL,
		release_key TEXT NOT NULL,
		state TEXT NOT NULL,
		wave INTEGER NOT NULL,
		first_seen BIGINT NOT NULL,
		applied_at BIGINT NOT NULL,
		detail TEXT NOT NULL,
		PRIMARY KEY (device, release_key)
	);
	INSERT INTO device_releases_v3 (device, release_key, state, wave, first_seen, applied_at, detail)
		SELECT device, k, state, wave, seen, applied, '' FROM (
			SELECT device, KEY(revision) AS k, state, wave,
				MIN(first_seen) OVER (PARTITION BY device, KEY(revision)) AS seen,
				COALESCE(MIN(NULLIF(applied_at, 0)) OVER (PARTITION BY device, KEY(revision)), 0) AS applied,
				ROW_NUMBER() OVER (PARTITION BY device, KEY(revision) ORDER BY
					CASE state WHEN 'failed' THEN 0 WHEN 'applied' THEN 1 WHEN 'superseded' THEN 3 ELSE 2 END, first_seen DESC, revision) AS n
			FROM device_releases) t
		WHERE n = 1;
	DROP TABLE device_releases;
	ALTER TABLE device_releases_v3 RENAME TO device_releases;
	CREATE INDEX device_releases_release ON device_releases (release_key, wave, device, state, applied_at);
	ALTER TABLE devices ADD COLUMN applied_release TEXT NOT NULL DEFAULT '';
	ALTER TABLE devices ADD COLUMN target_release TEXT NOT NULL DEFAULT '';
	ALTER TABLE devices ADD COLUMN resource_ids TEXT NOT NULL DEFAULT '';
	ALTER TABLE devices ADD COLUMN applied_commit TEXT NOT NULL DEFAULT '';
	ALTER TABLE devices ADD COLUMN resources_unknown INTEGER NOT NULL DEFAULT 0;
	UPDATE devices SET applied_release = KEY(applied), target_release = KEY(target);
	UPDATE devices SET applied_commit = applied_release WHERE applied_release LIKE 'commit:%';
	CREATE INDEX devices_verdict ON devices (name, applied_release, applied_commit, state, crash_loop, resources_unknown);
	CREATE INDEX devices_wave ON devices (wave, name, resources_unknown);
	CREATE TABLE device_resources (
		device TEXT NOT NULL,
		resource_id TEXT NOT NULL,
		PRIMARY KEY (device, resource_id)
	);
	CREATE TABLE device_parts (
		device TEXT NOT NULL,
		part TEXT NOT NULL,
		state TEXT NOT NULL,
		wave INTEGER NOT NULL,
		applied_at BIGINT NOT NULL,
		PRIMARY KEY (device, part)
	);
	CREATE INDEX device_parts_part ON device_parts (part, wave, device, state, applied_at);
	CREATE TABLE release_tags (
		resource_id TEXT NOT NULL,
		tag TEXT NOT NULL,
		digest TEXT NOT NULL,
		release_key TEXT NOT NULL,
		PRIMARY KEY (resource_id, tag, digest, release_key)
	);
	ALTER TABLE events ADD COLUMN release_key TEXT NOT NULL DEFAULT '';`)
}

// sqliteKeyOf is migration 3's key of a revision column, in SQLite.
func sqliteKeyOf(col string) string {
	return `(CASE WHEN instr(` + col + `, '@sha1:') > 0 THEN 'commit:' || lower(substr(` + col + `, instr(` + col + `, '@sha1:') + 6))
		WHEN substr(` + col + `, 1, 5) = 'sha1:' THEN 'commit:' || lower(substr(` + col + `, 6))
		ELSE ` + col + ` END)`
}

// postgresKeyOf is migration 3's key of a revision column, in PostgreSQL.
func postgresKeyOf(col string) string {
	return `(CASE WHEN strpos(` + col + `, '@sha1:') > 0 THEN 'commit:' || lower(substr(` + col + `, strpos(` + col + `, '@sha1:') + 6))
		WHEN substr(` + col + `, 1, 5) = 'sha1:' THEN 'commit:' || lower(substr(` + col + `, 6))
		ELSE ` + col + ` END)`
}

// declareMigrated gives each device the models and services it declares
// (devices.resource_ids, device_resources) as its stored status document
// tells them (declaredIDs): the ids of its resources of kind model/ and
// service/, as schema 2 kept no release resources; unknown when it lists
// none, or cannot be read. Without them, a verdict on a release of
// digests would find no earlier device declaring it until each reported
// again, and go.
func declareMigrated(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT name, status FROM devices`)
	if err != nil {
		return fmt.Errorf("read the devices: %w", err)
	}
	declared := map[string]string{}
	for rows.Next() {
		var name, raw string
		if err := rows.Scan(&name, &raw); err != nil {
			rows.Close()
			return fmt.Errorf("read the devices: %w", err)
		}
		var st api.Status
		if json.Unmarshal([]byte(raw), &st) != nil {
			st = api.Status{} // unknown
		}
		declared[name] = declaredIDs(&st, nil)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the devices: %w", err)
	}
	for name, ids := range declared {
		if _, err := tx.ExecContext(ctx, `UPDATE devices SET resource_ids = $2, resources_unknown = $3 WHERE name = $1`, name, ids, resourcesUnknown(ids)); err != nil {
			return fmt.Errorf("write the resources of %s: %w", name, err)
		}
		if err := writeResources(ctx, tx, name, ids); err != nil {
			return err
		}
	}
	return nil
}
