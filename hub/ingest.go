package hub

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/internal/failpoint"
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
)

var results = []string{ResultAccepted, ResultReplayed, ResultUnauthorized, ResultForbidden, ResultTooLarge, ResultMalformed, ResultError}

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
}

// errReplayed marks a report older than the one the hub holds.
var errReplayed = errors.New("replayed")

// Ingest records s, reported by its device at now, all in one
// transaction: the device's row, the events it derives from the last
// report, and the device's part in each release it names. A report whose
// lastReconcile is older than the last one taken is ignored.
func (s *Store) Ingest(ctx context.Context, st *status.Status, now time.Time) (ingested, error) {
	reconciled, err := time.Parse(time.RFC3339Nano, st.LastReconcile)
	if err != nil {
		return ingested{result: ResultMalformed}, fmt.Errorf("lastReconcile %q is not an RFC 3339 time", st.LastReconcile)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		return ingested{result: ResultMalformed}, err
	}
	var res ingested
	err = s.tx(ctx, func(tx *sql.Tx) error {
		res = ingested{result: ResultAccepted}
		lock := ""
		if s.dialect == postgres {
			lock = " FOR UPDATE"
		}
		var prevRaw string
		var prevReconciled, firstSeen int64
		var prev *status.Status
		err := tx.QueryRowContext(ctx, `SELECT status, reconciled, first_seen FROM devices WHERE name = $1`+lock, st.Device).Scan(&prevRaw, &prevReconciled, &firstSeen)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			firstSeen = now.UnixNano()
		case err != nil:
			return fmt.Errorf("read device %s: %w", st.Device, err)
		default:
			if reconciled.UnixNano() < prevReconciled {
				return errReplayed
			}
			prev = &status.Status{}
			if err := json.Unmarshal([]byte(prevRaw), prev); err != nil {
				prev = nil // a row this hub cannot read: start the device's history afresh
			}
		}
		labels, _ := json.Marshal(st.Labels)
		if st.Labels == nil {
			labels = []byte("{}")
		}
		wave := deviceWave(st)
		if _, err := tx.ExecContext(ctx, `INSERT INTO devices (name, labels, applied, target, state, held, wave, last_error, reconciled, last_seen, first_seen, status, crash_loop)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (name) DO UPDATE SET labels = excluded.labels, applied = excluded.applied, target = excluded.target,
				state = excluded.state, held = excluded.held, wave = excluded.wave, last_error = excluded.last_error,
				reconciled = excluded.reconciled, last_seen = excluded.last_seen, status = excluded.status, crash_loop = excluded.crash_loop`,
			st.Device, string(labels), st.AppliedRevision, target(st), deviceState(st), st.Held, wave, st.LastError,
			reconciled.UnixNano(), now.UnixNano(), firstSeen, string(raw), strings.Join(crashLooping(st), ",")); err != nil {
			return fmt.Errorf("write device %s: %w", st.Device, err)
		}
		res.events = events(prev, st)
		res.crashLoops = newCrashLoops(prev, st)
		seq := 0 // after the events of a report taken at the same instant
		if len(res.events) > 0 {
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq) + 1, 0) FROM events WHERE device = $1 AND at = $2`, st.Device, now.UnixNano()).Scan(&seq); err != nil {
				return fmt.Errorf("read the events of %s: %w", st.Device, err)
			}
		}
		for i, e := range res.events {
			if _, err := tx.ExecContext(ctx, `INSERT INTO events (device, at, seq, kind, revision, detail) VALUES ($1, $2, $3, $4, $5, $6)`,
				st.Device, now.UnixNano(), seq+i, e.Kind, e.Revision, e.Detail); err != nil {
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
		res.converged, err = s.releases(ctx, tx, st, wave, now)
		return err
	})
	if errors.Is(err, errReplayed) {
		return ingested{result: ResultReplayed}, nil
	}
	if err != nil {
		return ingested{result: ResultError}, err
	}
	return res, nil
}

// releases records the device's part in every release it names, and
// those it named before: the applied one, the target, the rolled back.
func (s *Store) releases(ctx context.Context, tx *sql.Tx, st *status.Status, wave int, now time.Time) ([]time.Duration, error) {
	type part struct {
		state   string
		wave    int
		applied int64
	}
	parts := map[string]part{}
	rows, err := tx.QueryContext(ctx, `SELECT revision, state, wave, applied_at FROM device_releases WHERE device = $1`, st.Device)
	if err != nil {
		return nil, fmt.Errorf("read the releases of %s: %w", st.Device, err)
	}
	for rows.Next() {
		var rev string
		var p part
		if err := rows.Scan(&rev, &p.state, &p.wave, &p.applied); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the releases of %s: %w", st.Device, err)
		}
		parts[rev] = p
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the releases of %s: %w", st.Device, err)
	}
	revs := map[string]bool{}
	for rev := range parts {
		revs[rev] = true
	}
	for _, rev := range []string{st.AppliedRevision, target(st)} {
		if rev != "" {
			revs[rev] = true
		}
	}
	for _, q := range st.Quarantined {
		if q.Revision != "" {
			revs[q.Revision] = true
		}
	}
	var converged []time.Duration
	for rev := range revs {
		old, known := parts[rev]
		state := releaseState(st, rev)
		switch {
		case state == "" && known && (old.state == StateApplied || old.state == StateFailed):
			continue // it ran or failed here; what came after does not change that
		case state == "":
			state = StateSuperseded
		}
		w := old.wave
		if !known {
			w = -1
		}
		switch {
		case wave < 0:
		case rev == target(st) && (state != StateApplied || st.Wave != nil):
			// The device's wave in the rollout of its target; a hold's
			// reason names it only while the release waits.
			w = wave
		case w < 0 && st.Wave != nil && state == StateFailed:
			w = wave // rolled back at once, before any report named it
		}
		applied := old.applied
		if state == StateApplied && applied == 0 {
			applied = now.UnixNano()
		}
		if known && old.state == state && old.wave == w && old.applied == applied {
			continue
		}
		var releaseSeen int64
		if _, err := tx.ExecContext(ctx, `INSERT INTO releases (revision, first_seen) VALUES ($1, $2) ON CONFLICT (revision) DO NOTHING`, rev, now.UnixNano()); err != nil {
			return nil, fmt.Errorf("record release %s: %w", rev, err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT first_seen FROM releases WHERE revision = $1`, rev).Scan(&releaseSeen); err != nil {
			return nil, fmt.Errorf("read release %s: %w", rev, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO device_releases (device, revision, state, wave, first_seen, applied_at) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (device, revision) DO UPDATE SET state = excluded.state, wave = excluded.wave, applied_at = excluded.applied_at`,
			st.Device, rev, state, w, now.UnixNano(), applied); err != nil {
			return nil, fmt.Errorf("record %s's part in release %s: %w", st.Device, rev, err)
		}
		// A device's first report names what it already runs: that is not
		// a convergence the hub saw.
		if state == StateApplied && old.applied == 0 && known {
			converged = append(converged, time.Duration(applied-releaseSeen))
		}
	}
	return converged, nil
}
