package hub

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// rfc3339 formats unix nanoseconds; "" for 0.
func rfc3339(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339)
}

func (s *Store) stateCounts(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT state, COUNT(*) FROM devices GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("%s: count devices: %w", s.display, err)
	}
	defer rows.Close()
	counts := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("%s: count devices: %w", s.display, err)
		}
		counts[st] = n
	}
	return counts, rows.Err()
}

const deviceColumns = `name, labels, applied, target, applied_release, target_release, state, held, wave, last_error, reconciled, last_seen, first_seen, rollout`

func scanDevice(sc interface{ Scan(...any) error }, more ...any) (Device, error) {
	var d Device
	var labels string
	var wave int
	var reconciled, lastSeen, firstSeen int64
	if err := sc.Scan(append([]any{&d.Name, &labels, &d.Applied, &d.Target, &d.AppliedRelease, &d.TargetRelease, &d.State, &d.Held, &wave, &d.LastError, &reconciled, &lastSeen, &firstSeen, &d.Rollout}, more...)...); err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(labels), &d.Labels); err != nil || d.Labels == nil {
		d.Labels = map[string]string{}
	}
	if wave >= 0 {
		d.Wave = &wave
	}
	d.LastReconcile, d.LastSeen, d.FirstSeen = rfc3339(reconciled), rfc3339(lastSeen), rfc3339(firstSeen)
	return d, nil
}

// Devices lists every device, by name.
func (s *Store) Devices(ctx context.Context) ([]Device, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+deviceColumns+` FROM devices ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("%s: list devices: %w", s.display, err)
	}
	defer rows.Close()
	var out []Device
	for rows.Next() {
		d, err := scanDevice(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: list devices: %w", s.display, err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// ErrNotFound is a device or release the hub has no report of.
var ErrNotFound = errors.New("not found")

// Device returns one device and its recent events (at most limit).
func (s *Store) Device(ctx context.Context, name string, limit int) (DeviceDetail, error) {
	var dd DeviceDetail
	row := s.db.QueryRowContext(ctx, `SELECT `+deviceColumns+`, status FROM devices WHERE name = $1`, name)
	var raw string
	d, err := scanDevice(row, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return dd, fmt.Errorf("device %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return dd, fmt.Errorf("%s: read device %q: %w", s.display, name, err)
	}
	dd.Device, dd.Status = d, json.RawMessage(raw)
	rows, err := s.db.QueryContext(ctx, `SELECT at, kind, revision, release_key, detail FROM events WHERE device = $1 ORDER BY at DESC, seq DESC LIMIT $2`, name, limit)
	if err != nil {
		return dd, fmt.Errorf("%s: read the events of %q: %w", s.display, name, err)
	}
	defer rows.Close()
	dd.Events = []Event{}
	for rows.Next() {
		var e Event
		var at int64
		if err := rows.Scan(&at, &e.Kind, &e.Revision, &e.Release, &e.Detail); err != nil {
			return dd, fmt.Errorf("%s: read the events of %q: %w", s.display, name, err)
		}
		e.At = rfc3339(at)
		dd.Events = append(dd.Events, e)
	}
	return dd, rows.Err()
}
