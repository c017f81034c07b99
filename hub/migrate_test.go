package hub

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
		assert.Equal(t, len(migrations), version)

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
		s := api.Status{FormatVersion: api.FormatVersion, Device: "cam-2", AppliedRevision: "main@sha1:" + hashB, LastReconcile: now.Format(time.RFC3339Nano)}
		_, err = store.Ingest(ctx, &s, now)
		require.NoError(t, err)
		key, err := store.FindRelease(ctx, "bbbb")
		require.NoError(t, err)
		rd, err = store.ReleaseDetail(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, map[string]int{StateFailed: 1, StateApplied: 1, StateUnreported: 1}, rd.Counts)
	})
}

// A hub of schema 2 kept no release resources: the migration gives each
// device the models and services its stored status document lists, so
// that a verdict on a release of digests waits for the canaries that run
// the model before they report again. A device whose declarations the
// hub cannot know (it lists no model nor service: tend v0.1.0, which
// sends no release resources, or a device that has not ticked) is waited
// for too, before and after it reports again, rather than taken for an
// empty wave.
func TestMigrateDeclaresWhatDevicesRun(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		old, err := open(dbURL)
		require.NoError(t, err)
		require.NoError(t, old.migrateTo(ctx, 2))
		for _, d := range []struct {
			name      string
			resources []string
		}{
			{"cam-0", []string{"file:/etc/a", "model/detector", "service/infer"}}, // runs the detector
			{"cam-1", []string{"file:/etc/a"}},                                    // lists no model: unknown
			{"cam-2", []string{"model/reid"}},                                     // runs another model
		} {
			s := api.Status{FormatVersion: api.FormatVersion, Device: d.name, AppliedRevision: rev1, LastReconcile: "2026-12-03T11:00:00Z", Wave: intp(0)}
			for _, id := range d.resources {
				s.Resources = append(s.Resources, api.ResourceStatus{ID: id, State: api.ResourceOK})
			}
			_, err := old.db.ExecContext(ctx, `INSERT INTO devices (name, labels, applied, target, state, held, wave, last_error, reconciled, last_seen, first_seen, status, crash_loop)
				VALUES ($1, '{}', $2, $2, 'applied', '', 0, '', 1, 1, 1, $3, '')`, d.name, rev1, string(mustJSON(t, s)))
			require.NoError(t, err)
		}
		require.NoError(t, old.Close())

		h := newTestHub(t, dbURL)
		th := api.Thresholds{MaxFailed: intp(0), MinApplied: 1}
		want := func(n int) BrakesVerdict {
			return BrakesVerdict{Release: string(model110), Revision: rev1, Before: 1, Devices: n,
				Reason: fmt.Sprintf("0 of %d wave-0 devices applied model/detector@sha256:1f16bbbbbbbb… (minApplied 1)", n)}
		}
		assert.Equal(t, want(2), h.verdictOn(model110, rev1, th), "cam-0 runs the detector, cam-1 may")

		// cam-0 reports as tend v0.1.0 does, its last tick acting on a
		// file alone; cam-2 as a tend that sends its release resources.
		v010 := h.doc("cam-0", rev1, rev1)
		v010.Wave = intp(0)
		h.report(h.token("cam-0"), v010)
		h.report(h.token("cam-2"), h.agentDoc("cam-2", 0, rev1, commit1, rev1, commit1, detector("1.0.0", digest100)[2:]))
		assert.Equal(t, want(2), h.verdictOn(model110, rev1, th), "cam-0's declarations are unknown; cam-2 declares the reid alone")
		h.report(h.token("cam-1"), h.agentDoc("cam-1", 0, rev1, commit1, rev1, commit1, nil))
		assert.Equal(t, want(1), h.verdictOn(model110, rev1, th), "cam-1 declares no model")
	})
}
