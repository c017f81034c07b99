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

	"github.com/tend-dev/tend/api"
)

// newRelease is a release as the releases table keeps it.
func newRelease(key, revision, resources string, first int64) *Release {
	r := &Release{Key: key, Revision: revision, FirstSeen: rfc3339(first), Counts: map[string]int{}}
	if json.Unmarshal([]byte(resources), &r.Resources) != nil || r.Resources == nil {
		r.Resources = []api.ReleaseResource{}
	}
	return r
}

// Releases lists the newest releases (at most limit), newest first.
func (s *Store) Releases(ctx context.Context, limit int) ([]Release, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.release_key, r.revision, r.resources, r.first_seen, d.state, COUNT(*) FROM
		(SELECT release_key, revision, resources, first_seen FROM releases ORDER BY first_seen DESC, release_key LIMIT $1) r
		JOIN device_releases d ON d.release_key = r.release_key
		GROUP BY r.release_key, r.revision, r.resources, r.first_seen, d.state`, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: list releases: %w", s.display, err)
	}
	defer rows.Close()
	byKey := map[string]*Release{}
	firstSeen := map[string]int64{} // by key, unix ns: finer than FirstSeen
	for rows.Next() {
		var key, rev, resources, state string
		var first int64
		var n int
		if err := rows.Scan(&key, &rev, &resources, &first, &state, &n); err != nil {
			return nil, fmt.Errorf("%s: list releases: %w", s.display, err)
		}
		r := byKey[key]
		if r == nil {
			r = newRelease(key, rev, resources, first)
			byKey[key], firstSeen[key] = r, first
		}
		r.Counts[state] = n
		if state != StateSuperseded {
			r.Devices += n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]Release, 0, len(byKey))
	for _, r := range byKey {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := firstSeen[out[i].Key], firstSeen[out[j].Key]; a != b {
			return a > b
		}
		return out[i].Key < out[j].Key
	})
	return out, nil
}

// likePrefix is a LIKE pattern matching strings that begin with p.
func likePrefix(p string) string { return likeEscape(p) + "%" }

// likeEscape escapes LIKE's wildcards in p (ESCAPE '\').
func likeEscape(p string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p)
}

// ReleaseDetail returns release key with every device's part in it.
func (s *Store) ReleaseDetail(ctx context.Context, key api.ReleaseKey) (ReleaseDetail, error) {
	var rd ReleaseDetail
	var rev, resources string
	var first int64
	err := s.db.QueryRowContext(ctx, `SELECT revision, resources, first_seen FROM releases WHERE release_key = $1`, string(key)).Scan(&rev, &resources, &first)
	if errors.Is(err, sql.ErrNoRows) {
		return rd, fmt.Errorf("release %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return rd, fmt.Errorf("%s: read release %s: %w", s.display, key, err)
	}
	rd.ReleaseSummary = *newRelease(string(key), rev, resources, first)
	rows, err := s.db.QueryContext(ctx, `SELECT device, state, wave, applied_at, detail FROM device_releases WHERE release_key = $1 ORDER BY device`, string(key))
	if err != nil {
		return rd, fmt.Errorf("%s: read release %s: %w", s.display, key, err)
	}
	defer rows.Close()
	waves := map[int]*Wave{}
	rd.DeviceParts = []ReleaseDevice{}
	for rows.Next() {
		var p ReleaseDevice
		var wave int
		var applied int64
		if err := rows.Scan(&p.Device, &p.State, &wave, &applied, &p.Detail); err != nil {
			return rd, fmt.Errorf("%s: read release %s: %w", s.display, key, err)
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
	n, err := s.unreported(ctx, key, rev)
	if err != nil {
		return rd, err
	}
	if n > 0 {
		rd.Counts[StateUnreported] = n
		rd.Devices += n
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

// unreported counts the devices that are part of release key, first seen
// at revision rev, and have not reported it (down, or not ticked since):
// those following rev's ref, and, for a release of digests, whose last
// report's target declares one of the models or services the key moves
// (see declaredIDs). A device whose declarations the hub does not know
// is not counted for a release of digests: nothing says it runs the
// model.
func (s *Store) unreported(ctx context.Context, key api.ReleaseKey, rev string) (int, error) {
	ref, _, ok := strings.Cut(rev, "@")
	if !ok {
		return 0, nil
	}
	q := `SELECT COUNT(*) FROM devices WHERE (applied LIKE $1 ESCAPE '\' OR target LIKE $1 ESCAPE '\')
		AND name NOT IN (SELECT device FROM device_releases WHERE release_key = $2)`
	args := []any{likePrefix(ref + "@"), string(key)}
	if _, commit := key.Commit(); !commit {
		var ids []string
		for _, p := range key.Parts() {
			id, _, _ := strings.Cut(p, "@")
			args = append(args, "% "+likeEscape(id)+" %")
			ids = append(ids, fmt.Sprintf(`resource_ids LIKE $%d ESCAPE '\'`, len(args)))
		}
		q += ` AND (` + strings.Join(ids, " OR ") + `)`
	}
	var n int
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: read release %s: %w", s.display, key, err)
	}
	return n, nil
}
