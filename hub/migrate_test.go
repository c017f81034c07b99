package hub

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/api"
)

// A hub of schema 2, with devices, releases by revision and events, is
// migrated to schema 3 at start: releases by commit key, the same commit
// at two refs one release, each device's parts merged.
func TestMigrateFromSchema2(t *testing.T) {
	const (
		hashA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		hashB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	)
	stores(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		old, err := open(dbURL)
		require.NoError(t, err)
		require.NoError(t, old.migrateTo(ctx, 2))
		for _, q := range []string{
			// cam-1 applied A at main, saw it at HEAD too, and failed B;
			// cam-2 runs A; cam-3 never applied anything.
			`INSERT INTO devices (name, labels, applied, target, state, held, wave, last_error, reconciled, last_seen, first_seen, status, crash_loop) VALUES
				('cam-1', '{}', 'main@sha1:` + hashA + `', 'main@sha1:` + hashB + `', 'failed', '', 0, '', 10, 10, 1, '{"formatVersion":"1","device":"cam-1","appliedRevision":"main@sha1:` + hashA + `","targetRevision":"main@sha1:` + hashB + `","lastReconcile":"1970-01-01T00:00:00Z","lastError":"","suspended":false,"resources":[],"services":[],"drift":[]}', ''),
				('cam-2', '{}', 'main@sha1:` + hashA + `', 'main@sha1:` + hashA + `', 'applied', '', 1, '', 10, 10, 1, '{}', ''),
				('cam-3', '{}', '', 'main@sha1:` + hashA + `', 'pending', '', -1, '', 10, 10, 1, '{}', '')`,
			`INSERT INTO releases (revision, first_seen) VALUES ('main@sha1:` + hashA + `', 5), ('HEAD@sha1:` + strings.ToUpper(hashA) + `', 3), ('main@sha1:` + hashB + `', 7)`,
			`INSERT INTO device_releases (device, revision, state, wave, first_seen, applied_at) VALUES
				('cam-1', 'main@sha1:` + hashA + `', 'superseded', 0, 6, 0),
				('cam-1', 'HEAD@sha1:` + strings.ToUpper(hashA) + `', 'applied', 0, 4, 9),
				('cam-1', 'main@sha1:` + hashB + `', 'failed', 0, 7, 0),
				('cam-2', 'main@sha1:` + hashA + `', 'applied', 1, 5, 8)`,
			`INSERT INTO events (device, at, seq, kind, revision, detail) VALUES ('cam-1', 9, 0, 'applied', 'main@sha1:` + hashA + `', '')`,
		} {
			_, err := old.db.ExecContext(ctx, q)
			require.NoError(t, err, q)
		}
		require.NoError(t, old.Close())

		store, err := Open(ctx, dbURL)
		require.NoError(t, err)
		t.Cleanup(func() { store.Close() })
		var version int
		require.NoError(t, store.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version))
		assert.Equal(t, 3, version)

		rels, err := store.Releases(ctx, 10)
		require.NoError(t, err)
		require.Len(t, rels, 2)
		assert.Equal(t, "commit:"+hashB, rels[0].Key)
		assert.Equal(t, "commit:"+hashA, rels[1].Key, "two refs at one commit: one release")
		assert.Equal(t, "HEAD@sha1:"+strings.ToUpper(hashA), rels[1].Revision, "first seen at the older")
		assert.Equal(t, rfc3339(3), rels[1].FirstSeen)

		rd, err := store.ReleaseDetail(ctx, api.ReleaseKey("commit:"+hashA))
		require.NoError(t, err)
		require.Len(t, rd.DeviceParts, 2)
		assert.Equal(t, ReleaseDevice{Device: "cam-1", State: StateApplied, Wave: intp(0), Applied: rfc3339(9), AfterSeconds: time.Duration(6).Seconds()}, rd.DeviceParts[0], "applied beats superseded")
		assert.Equal(t, StateApplied, rd.DeviceParts[1].State)
		assert.Equal(t, map[string]int{StateApplied: 2}, rd.Counts, "first seen at HEAD, which cam-3 does not follow")
		rd, err = store.ReleaseDetail(ctx, api.ReleaseKey("commit:"+hashB))
		require.NoError(t, err)
		assert.Equal(t, map[string]int{StateFailed: 1, StateUnreported: 2}, rd.Counts, "cam-2 and cam-3 follow main and have not reported it")

		devices, err := store.Devices(ctx)
		require.NoError(t, err)
		require.Len(t, devices, 3)
		assert.Equal(t, "commit:"+hashA, devices[0].AppliedRelease)
		assert.Equal(t, "commit:"+hashB, devices[0].TargetRelease)
		assert.Equal(t, "", devices[2].AppliedRelease, "never applied")
		dd, err := store.Device(ctx, "cam-1", 10)
		require.NoError(t, err)
		require.Len(t, dd.Events, 1)
		assert.Equal(t, Event{At: rfc3339(9), Kind: EventApplied, Revision: "main@sha1:" + hashA}, dd.Events[0])

		// The migrated hub takes reports, and finds releases by prefix.
		now := time.Unix(0, 20)
		s := status.Status{FormatVersion: status.FormatVersion, Device: "cam-2", AppliedRevision: "main@sha1:" + hashB, LastReconcile: now.Format(time.RFC3339Nano)}
		_, err = store.Ingest(ctx, &s, now)
		require.NoError(t, err)
		key, err := store.FindRelease(ctx, "bbbb")
		require.NoError(t, err)
		rd, err = store.ReleaseDetail(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, map[string]int{StateFailed: 1, StateApplied: 1, StateUnreported: 1}, rd.Counts)
	})
}
