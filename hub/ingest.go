package hub

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/rollout"
)

// maxEvents is how many events the hub keeps per device, newest.
const maxEvents = 200

// Ingest results, as tend_hub_reports_total counts them.
const (
	ResultAccepted     = "accepted"
	ResultReplayed     = "replayed"     // older than the last one taken: ignored
	ResultUnauthorized = "unauthorized" // no token, or an unknown one
	ResultForbidden    = "forbidden"    // a token posting another device's report
	ResultTooLarge     = "too_large"
	ResultMalformed    = "malformed"
	ResultError        = "error" // the database failed
	// ResultInconsistent is a report taken whose wave or rollout
	// disagrees with the one the hub worked out from the fleet repo
	// (--fleet-source): the hub's is recorded.
	ResultInconsistent = "inconsistent"
)

var results = []string{ResultAccepted, ResultInconsistent, ResultReplayed, ResultUnauthorized, ResultForbidden, ResultTooLarge, ResultMalformed, ResultError}

// ingested is what one report changed.
type ingested struct {
	result string
	// converged are, for each release this report applied for the first
	// time on the device, how long after the fleet first saw it.
	converged []time.Duration
	events    []Event
	// crashLoops are the services this report found in a crash loop that
	// the last one did not.
	crashLoops []string
	// applied is the key of the release the device runs.
	applied api.ReleaseKey
}

// errReplayed marks a report older than the one the hub holds.
var errReplayed = errors.New("replayed")

// Ingest records s, reported by its device at now, all in one
// transaction: the device's row, the events it derives from the last
// report, and the device's part in each release it names, at the wave and
// rollout it reports (see Placement). A report that does not come after
// the last one taken, by its reportSeq (see order.go), is ignored.
func (s *Store) Ingest(ctx context.Context, st *api.Status, now time.Time) (ingested, error) {
	place, err := reported(st)
	if err != nil {
		return ingested{result: ResultMalformed}, err
	}
	return s.IngestAt(ctx, st, place, now)
}

// IngestAt is Ingest with the device at place, as the hub worked it out
// (see Fleet.Place), or as reported.
func (s *Store) IngestAt(ctx context.Context, st *api.Status, place Placement, now time.Time) (ingested, error) {
	if err := checkLists(st); err != nil {
		return ingested{result: ResultMalformed}, err
	}
	ord, err := orderOf(st)
	if err != nil {
		return ingested{result: ResultMalformed}, err
	}
	k, err := keysOf(st)
	if err != nil {
		return ingested{result: ResultMalformed}, err
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return ingested{result: ResultMalformed}, err
	}
	var res ingested
	err = s.tx(ctx, func(tx *sql.Tx) error {
		res = ingested{result: ResultAccepted}
		stored, err := s.lockDevice(ctx, tx, st.Device, now)
		if err != nil {
			return err
		}
		if !place.Checked && place.Rollout == "" && stored != nil && stored.rollout != "" {
			// A report that leaves its rollout out is in the one its
			// device last named: leaving it out does not put a failure in
			// every rollout (see rolloutIs).
			place.Rollout = stored.rollout
		}
		var prevIDs string
		firstSeen := now.UnixNano()
		var prev *api.Status
		var pk keys
		if stored != nil {
			if err := ord.follows(st.Device, stored.order); err != nil {
				return err
			}
			prevIDs, firstSeen = stored.ids, stored.firstSeen
			prev = &api.Status{}
			if err := json.Unmarshal([]byte(stored.raw), prev); err != nil {
				prev = nil // a row this hub cannot read: start the device's history afresh
			} else if pk, err = keysOf(prev); err != nil {
				prev = nil
			}
		}
		labels, _ := json.Marshal(st.Labels)
		if st.Labels == nil {
			labels = []byte("{}")
		}
		wave, ro := place.Wave, place.Rollout
		if !place.Checked && stored != nil && stored.target == string(k.target) && stored.wave >= 0 {
			// The wave it first reported for the release it works
			// towards stays while it does (see Placement).
			wave, ro = stored.wave, cmp.Or(stored.rollout, ro)
		}
		// Insert or compare, in one statement (orderWhere): no row is
		// written for a report that does not come after the one held.
		r, err := tx.ExecContext(ctx, `INSERT INTO devices (name, labels, applied, target, state, held, wave, last_error, reconciled, last_seen, first_seen, status, crash_loop, applied_release, target_release, resource_ids, applied_commit, resources_unknown, report_epoch, report_seq, rollout)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
			ON CONFLICT (name) DO UPDATE SET labels = excluded.labels, applied = excluded.applied, target = excluded.target,
				state = excluded.state, held = excluded.held, wave = excluded.wave, last_error = excluded.last_error,
				reconciled = excluded.reconciled, last_seen = excluded.last_seen, status = excluded.status, crash_loop = excluded.crash_loop,
				applied_release = excluded.applied_release, target_release = excluded.target_release, resource_ids = excluded.resource_ids,
				applied_commit = excluded.applied_commit, resources_unknown = excluded.resources_unknown,
				report_epoch = excluded.report_epoch, report_seq = excluded.report_seq, rollout = excluded.rollout`+orderWhere,
			st.Device, string(labels), st.AppliedRevision, target(st), deviceState(st, k), st.Held, wave, st.LastError,
			ord.reconciled, now.UnixNano(), firstSeen, string(raw), strings.Join(crashLooping(st), ","),
			string(k.applied), string(k.target), k.resourceIDs(), string(k.appliedCommit), resourcesUnknown(k.resourceIDs()),
			ord.epoch, ord.seq, ro)
		if err != nil {
			return fmt.Errorf("write device %s: %w", st.Device, err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("write device %s: %w", st.Device, err)
		} else if n == 0 {
			return errReplayed
		}
		if ids := k.resourceIDs(); ids != prevIDs {
			if err := writeResources(ctx, tx, st.Device, ids); err != nil {
				return err
			}
		}
		res.events = events(prev, pk, st, k)
		res.crashLoops = newCrashLoops(prev, st)
		seq := 0 // after the events of a report taken at the same instant
		if len(res.events) > 0 {
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE device = $1 AND at = $2`, st.Device, now.UnixNano()).Scan(&seq); err != nil {
				return fmt.Errorf("read the events of %s: %w", st.Device, err)
			}
		}
		for i, e := range res.events {
			if _, err := tx.ExecContext(ctx, `INSERT INTO events (device, at, seq, kind, revision, release_key, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				st.Device, now.UnixNano(), seq+i, e.Kind, e.Revision, e.Release, e.Detail); err != nil {
				return fmt.Errorf("write an event of %s: %w", st.Device, err)
			}
		}
		if len(res.events) > 0 {
			if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE device = $1 AND at < (SELECT at FROM events WHERE device = $1 ORDER BY at DESC LIMIT 1 OFFSET $2)`,
				st.Device, maxEvents); err != nil {
				return fmt.Errorf("trim the events of %s: %w", st.Device, err)
			}
		}
		failpoint.Hit("hub:ingest") // the device and its events written, its releases not yet
		var placed map[api.ReleaseKey]part
		var seen map[api.ReleaseKey]int64
		if res.converged, placed, seen, err = s.releases(ctx, tx, st, k, place, now); err != nil {
			return err
		}
		return writeParts(ctx, tx, st.Device, k, place.forParts(placed, seen), now)
	})
	if errors.Is(err, errReplayed) {
		return ingested{result: ResultReplayed}, nil
	}
	if errors.Is(err, errNoReportSeq) {
		return ingested{result: ResultMalformed}, err
	}
	if err != nil {
		return ingested{result: ResultError}, err
	}
	res.applied = k.applied
	return res, nil
}

// part is a device's part in one release, as device_releases keeps it.
type part struct {
	state   string
	wave    int
	rollout string
	applied int64 // when the hub first heard the device run it, unix ns; 0 if never
	detail  string
}

// releases records the device's part in every release it names, and
// those it named before: the one it runs, its target, and those rolled
// back on it. A rollback no report named before (the device took the
// release and rolled it back between two reports) is recorded under the
// key its quarantine entry gives: commit:HASH, or the one digest.
//
// It returns, with the convergences, the device's part in each release
// it recorded and when each was first recorded, for the wave and rollout
// of its parts in their parts.
func (s *Store) releases(ctx context.Context, tx *sql.Tx, st *api.Status, k keys, place Placement, now time.Time) ([]time.Duration, map[api.ReleaseKey]part, map[api.ReleaseKey]int64, error) {
	parts := map[api.ReleaseKey]part{}
	seen := map[api.ReleaseKey]int64{} // when each part was first recorded
	rows, err := tx.QueryContext(ctx, `SELECT release_key, state, wave, rollout, applied_at, detail, first_seen FROM device_releases WHERE device = $1`, st.Device)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read the releases of %s: %w", st.Device, err)
	}
	for rows.Next() {
		var key string
		var p part
		var first int64
		if err := rows.Scan(&key, &p.state, &p.wave, &p.rollout, &p.applied, &p.detail, &first); err != nil {
			rows.Close()
			return nil, nil, nil, fmt.Errorf("read the releases of %s: %w", st.Device, err)
		}
		parts[api.ReleaseKey(key)] = p
		seen[api.ReleaseKey(key)] = first
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("read the releases of %s: %w", st.Device, err)
	}
	named := map[api.ReleaseKey]bool{}
	for key := range parts {
		named[key] = true
	}
	for _, key := range []api.ReleaseKey{k.applied, k.target, k.appliedCommit} {
		if key != "" {
			named[key] = true
		}
	}
	revisions := map[api.ReleaseKey]string{k.target: k.targetRevision, k.applied: st.AppliedRevision}
	for _, p := range k.rolledBack {
		if !holdsPart(named, p) {
			q := k.quarantined[p]
			key := quarantineKey(q)
			named[key] = true
			if _, known := revisions[key]; !known {
				revisions[key] = quarantineRevision(q)
			}
		}
	}
	trimmed, err := s.trimReleases(ctx, tx, st.Device, named, seen, k)
	if err != nil {
		return nil, nil, nil, err
	}
	// In key order: concurrent reports lock the rows of releases they
	// share in one order.
	var converged []time.Duration
	placed := map[api.ReleaseKey]part{}
	for _, key := range slices.Sorted(maps.Keys(named)) {
		old, known := parts[key]
		state, q := partState(st, k, key)
		switch {
		case state == "" && known && (old.state == StateApplied || old.state == StateFailed):
			// It ran or failed here; what came after does not change that,
			// only where the fleet repo now puts the device (a checked
			// placement moves every part).
			if !place.Checked || old.wave == place.Wave && old.rollout == place.Rollout {
				placed[key] = old
				continue
			}
			state = old.state
		case state == "":
			state = StateSuperseded
		}
		w, ro := place.partIn(old, known, key, state, st, k)
		applied := old.applied
		if state == StateApplied && applied == 0 {
			applied = now.UnixNano()
		}
		detail := old.detail
		if q != nil {
			detail = failureDetail(q)
		}
		placed[key] = part{state: state, wave: w, rollout: ro, applied: applied, detail: detail}
		if known && old == placed[key] {
			continue
		}
		var releaseSeen int64
		if !k.ranOnly(key) {
			// A commit that changed nothing on the device is no release
			// of its own: only the device's part in it is kept, for the
			// devices it changed (see keys.appliedCommit).
			if releaseSeen, err = s.recordRelease(ctx, tx, key, revisions[key], k, now); err != nil {
				return nil, nil, nil, err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO device_releases (device, release_key, state, wave, rollout, first_seen, applied_at, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (device, release_key) DO UPDATE SET state = excluded.state, wave = excluded.wave, rollout = excluded.rollout, applied_at = excluded.applied_at, detail = excluded.detail`,
			st.Device, string(key), state, w, ro, now.UnixNano(), applied, detail); err != nil {
			return nil, nil, nil, fmt.Errorf("record %s's part in release %s: %w", st.Device, key, err)
		}
		// A device's first report names what it already runs, and a commit
		// that changed nothing on it moved nothing: neither is a
		// convergence the hub saw.
		if state == StateApplied && old.applied == 0 && known && key == k.applied {
			converged = append(converged, time.Duration(applied-releaseSeen))
		}
	}
	for _, key := range trimmed {
		placed[key] = part{state: StateTrimmed, wave: rollout.NoWave}
	}
	return converged, placed, seen, nil
}

// DefaultKeepReleases is how many releases the hub keeps each device's
// part in when Store.KeepReleases is not set; MinKeepReleases the least
// it may keep: the releases one report may name (its quarantined entries,
// applied and target) fit.
const (
	DefaultKeepReleases = 100
	MinKeepReleases     = api.MaxReportQuarantined + 3
)

// StateTrimmed marks, between releases and writeParts, a release whose
// device's part was trimmed: its parts are no longer kept either.
const StateTrimmed = "trimmed"

// trimReleases keeps device's part in at most Store.KeepReleases of the
// releases named (see releases), the newest first recorded, and never
// those its report names as applied or target: it removes the others
// from named and from device_releases, and the releases no device takes
// part in any more, with their tags. It returns the keys removed. So a
// device that makes up releases, in its reports or by failing every one,
// keeps a bounded share of the hub, and each report reads a bounded
// number of rows.
func (s *Store) trimReleases(ctx context.Context, tx *sql.Tx, device string, named map[api.ReleaseKey]bool, seen map[api.ReleaseKey]int64, k keys) ([]api.ReleaseKey, error) {
	keep := cmp.Or(s.KeepReleases, DefaultKeepReleases)
	if len(named) <= keep {
		return nil, nil
	}
	var old []api.ReleaseKey
	for key := range named {
		if key != k.applied && key != k.target && key != k.appliedCommit {
			old = append(old, key)
		}
	}
	// Oldest first; one not recorded yet (a rollback no report named) is
	// the newest.
	slices.SortFunc(old, func(a, b api.ReleaseKey) int {
		sa, oka := seen[a]
		sb, okb := seen[b]
		switch {
		case oka != okb && oka:
			return -1
		case oka != okb:
			return 1
		}
		return cmp.Or(cmp.Compare(sa, sb), cmp.Compare(a, b))
	})
	gone := old[:min(len(old), len(named)-keep)]
	var args []any
	for _, key := range gone {
		delete(named, key)
		if _, recorded := seen[key]; recorded {
			args = append(args, string(key))
		}
	}
	for c := range slices.Chunk(args, partsAStatement) {
		in := marks(2, len(c), 1)
		if _, err := tx.ExecContext(ctx, `DELETE FROM device_releases WHERE device = $1 AND release_key IN (`+in+`)`, append([]any{device}, c...)...); err != nil {
			return nil, fmt.Errorf("trim the releases of %s: %w", device, err)
		}
		for _, table := range []string{"release_tags", "releases"} {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE release_key IN (`+marks(1, len(c), 1)+`)
				AND NOT EXISTS (SELECT 1 FROM device_releases r WHERE r.release_key = `+table+`.release_key)`, c...); err != nil {
				return nil, fmt.Errorf("trim the releases of %s: %w", device, err)
			}
		}
	}
	return gone, nil
}

// writeResources replaces the rows of device_resources of device by the
// ids of its target's models and services, as keys.resourceIDs writes
// them (" model/a service/b "; none for " * ", which resources_unknown
// says).
func writeResources(ctx context.Context, tx *sql.Tx, device, ids string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM device_resources WHERE device = $1`, device); err != nil {
		return fmt.Errorf("write the resources of %s: %w", device, err)
	}
	for _, id := range strings.Fields(ids) {
		if id == anyResource {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO device_resources (device, resource_id) VALUES ($1, $2)`, device, id); err != nil {
			return fmt.Errorf("write the resources of %s: %w", device, err)
		}
	}
	return nil
}

// holdsPart reports whether a key among keys has part p.
func holdsPart(keys map[api.ReleaseKey]bool, p string) bool {
	for key := range keys {
		if slices.Contains(key.Parts(), p) {
			return true
		}
	}
	return false
}

// quarantineRevision is the revision a rolled back release was at: a
// commit's own, or the one a digest was rolled back at.
func quarantineRevision(q *api.Quarantined) string {
	if strings.Contains(q.Release, "@sha1:") {
		return q.Release
	}
	return q.Revision
}

// recordRelease records release key, first seen at revision, when the
// hub has no record of it, and gives it the resources of k when it is
// k's target and its record has none yet, with the tags they were
// resolved through (see writeTags). It returns when the fleet first
// reported it: now, or the first report of a device that ran the commit
// before any report named it as a release (see keys.ranOnly).
func (s *Store) recordRelease(ctx context.Context, tx *sql.Tx, key api.ReleaseKey, revision string, k keys, now time.Time) (int64, error) {
	resources := "[]"
	if key == k.target {
		resources = k.resourcesJSON()
	}
	var seen int64
	var oldRevision, oldResources string
	read := func() error {
		return tx.QueryRowContext(ctx, `SELECT first_seen, revision, resources FROM releases WHERE release_key = $1`, string(key)).Scan(&seen, &oldRevision, &oldResources)
	}
	err := read()
	if errors.Is(err, sql.ErrNoRows) {
		first := now.UnixNano()
		var ran int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MIN(first_seen), 0) FROM device_releases WHERE release_key = $1`, string(key)).Scan(&ran); err != nil {
			return 0, fmt.Errorf("read release %s: %w", key, err)
		}
		if ran != 0 && ran < first {
			first = ran
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO releases (release_key, revision, resources, first_seen) VALUES ($1, $2, $3, $4) ON CONFLICT (release_key) DO NOTHING`,
			string(key), revision, resources, first); err != nil {
			return 0, fmt.Errorf("record release %s: %w", key, err)
		}
		if resources != "[]" {
			if err := writeTags(ctx, tx, key, k.resources); err != nil {
				return 0, err
			}
		}
		err = read()
	}
	if err != nil {
		return 0, fmt.Errorf("read release %s: %w", key, err)
	}
	if (oldResources == "[]" && resources != "[]") || (oldRevision == "" && revision != "") {
		// A release first heard of without them: from a rollback no report
		// named, or in schema 2.
		if oldResources != "[]" {
			resources = oldResources
		}
		if oldRevision != "" {
			revision = oldRevision
		}
		if _, err := tx.ExecContext(ctx, `UPDATE releases SET revision = $2, resources = $3 WHERE release_key = $1`, string(key), revision, resources); err != nil {
			return 0, fmt.Errorf("record release %s: %w", key, err)
		}
		if oldResources == "[]" && resources != "[]" {
			if err := writeTags(ctx, tx, key, k.resources); err != nil {
				return 0, err
			}
		}
	}
	return seen, nil
}

// writeTags records the tags release key's resources rs were resolved
// through, for finding a release by a tag (Store.FindRelease): a row of
// release_tags each, at most maxReleaseResources (checkResources).
func writeTags(ctx context.Context, tx *sql.Tx, key api.ReleaseKey, rs []api.ReleaseResource) error {
	for _, r := range rs {
		if r.Tag == "" || !strings.HasPrefix(r.Digest, "sha256:") {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO release_tags (resource_id, tag, digest, release_key) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
			r.ID, r.Tag, r.Digest, string(key)); err != nil {
			return fmt.Errorf("record the tags of release %s: %w", key, err)
		}
	}
	return nil
}
