package hub

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
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

const deviceColumns = `name, labels, applied, target, state, held, wave, last_error, reconciled, last_seen, first_seen`

func scanDevice(sc interface{ Scan(...any) error }) (Device, error) {
	var d Device
	var labels string
	var wave int
	var reconciled, lastSeen, firstSeen int64
	if err := sc.Scan(&d.Name, &labels, &d.Applied, &d.Target, &d.State, &d.Held, &wave, &d.LastError, &reconciled, &lastSeen, &firstSeen); err != nil {
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

// DeviceDetail is a device with its last status document and its recent
// events, newest first.
type DeviceDetail struct {
	Device Device          `json:"device"`
	Events []Event         `json:"events"`
	Status json.RawMessage `json:"status"`
}

// Device returns one device and its recent events (at most limit).
func (s *Store) Device(ctx context.Context, name string, limit int) (DeviceDetail, error) {
	var dd DeviceDetail
	row := s.db.QueryRowContext(ctx, `SELECT `+deviceColumns+`, status FROM devices WHERE name = $1`, name)
	var raw string
	var d Device
	var labels string
	var wave int
	var reconciled, lastSeen, firstSeen int64
	err := row.Scan(&d.Name, &labels, &d.Applied, &d.Target, &d.State, &d.Held, &wave, &d.LastError, &reconciled, &lastSeen, &firstSeen, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return dd, fmt.Errorf("device %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return dd, fmt.Errorf("%s: read device %q: %w", s.display, name, err)
	}
	if json.Unmarshal([]byte(labels), &d.Labels) != nil || d.Labels == nil {
		d.Labels = map[string]string{}
	}
	if wave >= 0 {
		d.Wave = &wave
	}
	d.LastReconcile, d.LastSeen, d.FirstSeen = rfc3339(reconciled), rfc3339(lastSeen), rfc3339(firstSeen)
	dd.Device, dd.Status = d, json.RawMessage(raw)
	rows, err := s.db.QueryContext(ctx, `SELECT at, kind, revision, detail FROM events WHERE device = $1 ORDER BY at DESC, seq DESC LIMIT $2`, name, limit)
	if err != nil {
		return dd, fmt.Errorf("%s: read the events of %q: %w", s.display, name, err)
	}
	defer rows.Close()
	dd.Events = []Event{}
	for rows.Next() {
		var e Event
		var at int64
		if err := rows.Scan(&at, &e.Kind, &e.Revision, &e.Detail); err != nil {
			return dd, fmt.Errorf("%s: read the events of %q: %w", s.display, name, err)
		}
		e.At = rfc3339(at)
		dd.Events = append(dd.Events, e)
	}
	return dd, rows.Err()
}

// Release is a release and how many devices are in each state of it.
type Release struct {
	Revision  string         `json:"revision"`
	FirstSeen string         `json:"firstSeen"` // the fleet's first report naming it
	Devices   int            `json:"total"`     // devices it targets (superseded ones left out)
	Counts    map[string]int `json:"counts"`
	firstSeen int64
}

// Releases lists the newest releases (at most limit), newest first.
func (s *Store) Releases(ctx context.Context, limit int) ([]Release, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.revision, r.first_seen, d.state, COUNT(*) FROM
		(SELECT revision, first_seen FROM releases ORDER BY first_seen DESC, revision LIMIT $1) r
		JOIN device_releases d ON d.revision = r.revision
		GROUP BY r.revision, r.first_seen, d.state`, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: list releases: %w", s.display, err)
	}
	defer rows.Close()
	byRev := map[string]*Release{}
	for rows.Next() {
		var rev, state string
		var first int64
		var n int
		if err := rows.Scan(&rev, &first, &state, &n); err != nil {
			return nil, fmt.Errorf("%s: list releases: %w", s.display, err)
		}
		r := byRev[rev]
		if r == nil {
			r = &Release{Revision: rev, FirstSeen: rfc3339(first), Counts: map[string]int{}, firstSeen: first}
			byRev[rev] = r
		}
		r.Counts[state] = n
		if state != StateSuperseded {
			r.Devices += n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]Release, 0, len(byRev))
	for _, r := range byRev {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].firstSeen != out[j].firstSeen {
			return out[i].firstSeen > out[j].firstSeen
		}
		return out[i].Revision < out[j].Revision
	})
	return out, nil
}

// likePrefix is a LIKE pattern matching strings that begin with p.
func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

// ReleaseDevice is one device's part in a release.
type ReleaseDevice struct {
	Device string `json:"device"`
	State  string `json:"state"`
	Wave   *int   `json:"wave,omitempty"`
	// Applied is when the hub first heard the device run it; AfterSeconds
	// how long after the release's first sight that was.
	Applied      string  `json:"appliedAt,omitempty"`
	AfterSeconds float64 `json:"afterSeconds,omitempty"`
}

// Wave counts a release's devices of one rollout wave by state; Wave is
// nil for the devices no hold named a wave for.
type Wave struct {
	Wave    *int           `json:"wave"`
	Devices int            `json:"devices"`
	Counts  map[string]int `json:"counts"`
}

// ReleaseDetail is a release, its waves and its devices.
type ReleaseDetail struct {
	Release
	Waves       []Wave          `json:"waves"`
	DeviceParts []ReleaseDevice `json:"devices"`
}

// ReleaseDetail returns one release with every device's part in it.
func (s *Store) ReleaseDetail(ctx context.Context, rev string) (ReleaseDetail, error) {
	var rd ReleaseDetail
	var first int64
	err := s.db.QueryRowContext(ctx, `SELECT first_seen FROM releases WHERE revision = $1`, rev).Scan(&first)
	if errors.Is(err, sql.ErrNoRows) {
		return rd, fmt.Errorf("release %q: %w", rev, ErrNotFound)
	}
	if err != nil {
		return rd, fmt.Errorf("%s: read release %q: %w", s.display, rev, err)
	}
	rd.Release = Release{Revision: rev, FirstSeen: rfc3339(first), Counts: map[string]int{}, firstSeen: first}
	rows, err := s.db.QueryContext(ctx, `SELECT device, state, wave, applied_at FROM device_releases WHERE revision = $1 ORDER BY device`, rev)
	if err != nil {
		return rd, fmt.Errorf("%s: read release %q: %w", s.display, rev, err)
	}
	defer rows.Close()
	waves := map[int]*Wave{}
	rd.DeviceParts = []ReleaseDevice{}
	for rows.Next() {
		var p ReleaseDevice
		var wave int
		var applied int64
		if err := rows.Scan(&p.Device, &p.State, &wave, &applied); err != nil {
			return rd, fmt.Errorf("%s: read release %q: %w", s.display, rev, err)
		}
		if wave >= 0 {
			p.Wave = &wave
		}
		if applied != 0 {
			p.Applied = rfc3339(applied)
			p.AfterSeconds = time.Duration(applied - first).Seconds()
		}
		rd.DeviceParts = append(rd.DeviceParts, p)
		rd.Counts[p.State]++
		if p.State == StateSuperseded {
			continue
		}
		rd.Devices++
		w := waves[wave]
		if w == nil {
			w = &Wave{Wave: p.Wave, Counts: map[string]int{}}
			waves[wave] = w
		}
		w.Devices++
		w.Counts[p.State]++
	}
	if err := rows.Err(); err != nil {
		return rd, err
	}
	// Devices following the release's ref that have not reported it yet
	// (down, or not ticked since) are part of it too.
	if ref, _, ok := strings.Cut(rev, "@"); ok {
		var n int
		err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM devices WHERE (applied LIKE $1 ESCAPE '\' OR target LIKE $1 ESCAPE '\')
			AND name NOT IN (SELECT device FROM device_releases WHERE revision = $2)`, likePrefix(ref+"@"), rev).Scan(&n)
		if err != nil {
			return rd, fmt.Errorf("%s: read release %q: %w", s.display, rev, err)
		}
		if n > 0 {
			rd.Counts[StateUnreported] = n
			rd.Devices += n
		}
	}
	keys := make([]int, 0, len(waves))
	for k := range waves {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	rd.Waves = []Wave{}
	for _, k := range keys {
		rd.Waves = append(rd.Waves, *waves[k])
	}
	return rd, nil
}
