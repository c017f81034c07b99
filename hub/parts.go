package hub

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tend-dev/tend/api"
)

// A release key of several parts is what made a release new on the
// device that reported it; another device may have taken the same
// digests one at a time, or with a commit. device_parts keeps each
// device's part in each part of a key (a commit's key, commit:HASH, or
// one digest, ID@sha256:HEX), so that a verdict on a key counts a device
// that runs all of its parts, or rolled back one of them, whatever key it
// took or failed it under.

// devicePart is a device's part in one part of a release key: failed
// when it rolled the part back (and stays so, as a release's part does),
// applied while it runs it, since applied (unix ns: the hub's first
// report of it running the part, without a pause since).
type devicePart struct {
	state   string // StateApplied or StateFailed
	wave    int
	rollout string
	applied int64 // 0 when failed
}

// keyParts are the parts of key, each as the key of a release of it
// alone: commit:HASH, or ID@sha256:HEX.
func keyParts(key api.ReleaseKey) []string {
	if _, commit := key.Commit(); commit {
		return []string{string(key)}
	}
	return key.Parts()
}

// partKey is the part of a key a quarantine entry's part stands for: a
// commit's hash is commit:HASH.
func partKey(p string) string {
	if strings.Contains(p, "@") {
		return p
	}
	return string(api.CommitRelease(p))
}

// running are the parts the device runs as far as its report tells, and
// whether the report tells if it runs part p at all. It runs the parts
// of its applied release and the commit of its applied revision, and
// what its release resources resolve to when nothing waits; while a
// release of digests waits, the resources that release does not move. A
// device runs one commit's release and one digest of a model or service:
// a part of a resource id the report resolves, other than the one it
// resolves, is not run.
func (k keys) running() (runs map[string]bool, tells func(p string) bool) {
	runs = map[string]bool{}
	resolved := map[string]bool{} // resource ids whose digest the report tells
	add := func(p string) {
		runs[p] = true
		if id, _, ok := strings.Cut(p, "@"); ok {
			resolved[id] = true
		}
	}
	for _, key := range []api.ReleaseKey{k.applied, k.appliedCommit} {
		if key != "" {
			for _, p := range keyParts(key) {
				add(p)
			}
		}
	}
	_, targetCommit := k.target.Commit()
	settled := k.target == k.applied && k.resources != nil // the resources are what it runs
	if k.applied != "" && (settled || !targetCommit) {
		moving := resourceIDsOf(k.target)
		for _, r := range k.resources {
			if (settled || !slices.Contains(moving, r.ID)) && strings.HasPrefix(r.Digest, "sha256:") {
				add(r.ID + "@" + r.Digest)
			}
		}
	}
	return runs, func(p string) bool {
		id, _, digest := strings.Cut(p, "@")
		return !digest || settled || resolved[id]
	}
}

// writeParts brings device's rows of device_parts to its report's keys k,
// at now: its quarantined parts failed, those it runs applied (since the
// first report that showed them, for those it ran already), a failure
// kept, the rest removed. Each part is in the wave and rollout of place:
// the first recorded, unless the hub placed the device itself.
func writeParts(ctx context.Context, tx *sql.Tx, device string, k keys, place partsPlace, now time.Time) error {
	old := map[string]devicePart{}
	rows, err := tx.QueryContext(ctx, `SELECT part, state, wave, rollout, applied_at FROM device_parts WHERE device = $1`, device)
	if err != nil {
		return fmt.Errorf("read the parts of %s: %w", device, err)
	}
	for rows.Next() {
		var p string
		var dp devicePart
		if err := rows.Scan(&p, &dp.state, &dp.wave, &dp.rollout, &dp.applied); err != nil {
			rows.Close()
			return fmt.Errorf("read the parts of %s: %w", device, err)
		}
		old[p] = dp
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the parts of %s: %w", device, err)
	}
	runs, tells := k.running()
	next := map[string]devicePart{}
	set := func(p, state string) {
		o, had := old[p]
		dp := devicePart{state: state}
		dp.wave, dp.rollout = place.first(p)
		switch {
		case place.Checked:
		case had && place.Wave < 0:
			dp.wave, dp.rollout = o.wave, o.rollout // a report that names no wave moves none
		case had && o.wave >= 0:
			// The first wave reported for it stays (see Placement).
			dp.wave, dp.rollout = o.wave, cmp.Or(o.rollout, place.Rollout)
		}
		if state == StateApplied {
			dp.applied = now.UnixNano()
			if had && o.state == StateApplied {
				dp.applied = o.applied
			}
		}
		next[p] = dp
	}
	for p := range k.quarantined {
		set(partKey(p), StateFailed)
	}
	for p := range runs {
		if _, failed := next[p]; !failed {
			set(p, StateApplied)
		}
	}
	for p, o := range old {
		switch _, done := next[p]; {
		case done:
		case o.state == StateFailed && !place.trimmed(p):
			set(p, StateFailed)
		case !tells(p):
			set(p, StateApplied) // it still runs it, as far as the hub knows
		}
	}
	var gone []any
	for _, p := range slices.Sorted(maps.Keys(old)) {
		if _, kept := next[p]; !kept {
			gone = append(gone, p)
		}
	}
	for c := range slices.Chunk(gone, partsAStatement) {
		if _, err := tx.ExecContext(ctx, `DELETE FROM device_parts WHERE device = $1 AND part IN (`+marks(2, len(c), 1)+`)`, append([]any{device}, c...)...); err != nil {
			return fmt.Errorf("write the parts of %s: %w", device, err)
		}
	}
	var changed []any
	for _, p := range slices.Sorted(maps.Keys(next)) {
		if dp := next[p]; dp != old[p] {
			changed = append(changed, device, p, dp.state, dp.wave, dp.rollout, dp.applied)
		}
	}
	for c := range slices.Chunk(changed, 6*partsAStatement) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO device_parts (device, part, state, wave, rollout, applied_at) VALUES `+marks(1, len(c)/6, 6)+`
			ON CONFLICT (device, part) DO UPDATE SET state = excluded.state, wave = excluded.wave, rollout = excluded.rollout, applied_at = excluded.applied_at`, c...); err != nil {
			return fmt.Errorf("write the parts of %s: %w", device, err)
		}
	}
	return nil
}

// partsAStatement bounds the rows of device_parts one statement writes,
// below the parameters SQLite and PostgreSQL take.
const partsAStatement = 200

// marks are n groups of `width` SQL parameters from $first: "$2, $3" for
// width 1, "($1, $2), ($3, $4)" for width 2.
func marks(first, n, width int) string {
	groups := make([]string, n)
	for i := range groups {
		one := make([]string, width)
		for j := range one {
			one[j] = fmt.Sprintf("$%d", first+i*width+j)
		}
		groups[i] = strings.Join(one, ", ")
		if width > 1 {
			groups[i] = "(" + groups[i] + ")"
		}
	}
	return strings.Join(groups, ", ")
}

// partTally is an earlier-wave device's parts in a release key, for a
// verdict: whether it rolled one back, how many it runs, and since when
// it runs them all (the latest of the times it began running each).
type partTally struct {
	failed  bool
	running int
	since   int64
}

// partsBefore tallies the parts in key of the devices of waves
// 0..before-1 of rollout ro (see rolloutIs), by device. An index covers
// the query.
func (s *Store) partsBefore(ctx context.Context, key api.ReleaseKey, ro string, before int) (map[string]partTally, error) {
	args := []any{before}
	for _, p := range keyParts(key) {
		args = append(args, p)
	}
	n := len(args) - 1
	inRollout := rolloutIs("p", ro, &args)
	index := ""
	if s.dialect == sqlite {
		index = " INDEXED BY device_parts_part"
	}
	rows, err := s.db.QueryContext(ctx, `SELECT p.device, p.state, p.applied_at FROM device_parts p`+index+`
		WHERE p.part IN (`+marks(2, n, 1)+`) AND `+inRollout+` AND p.wave >= 0 AND p.wave < $1`, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: read the parts of release %q: %w", s.display, key, err)
	}
	defer rows.Close()
	tallies := map[string]partTally{}
	for rows.Next() {
		var device, state string
		var applied int64
		if err := rows.Scan(&device, &state, &applied); err != nil {
			return nil, fmt.Errorf("%s: read the parts of release %q: %w", s.display, key, err)
		}
		t := tallies[device]
		switch state {
		case StateFailed:
			t.failed = true
		case StateApplied:
			t.running++
			t.since = max(t.since, applied)
		}
		tallies[device] = t
	}
	return tallies, rows.Err()
}

// counts reports whether t says something of key: a part rolled back,
// or all of them run.
func (t partTally) counts(key api.ReleaseKey) bool {
	return t.failed || t.running == len(keyParts(key))
}

// merge counts, in a device's part p in release key, its parts in key's
// parts (a tally that counts): a rolled back part fails key; a device
// that runs them all runs key, applied since it runs the last, unless
// its keys say it runs key (its soak counted as before).
func (t partTally) merge(p brakePart, key api.ReleaseKey) brakePart {
	switch {
	case t.failed:
		p.state = StateFailed
	case p.runs:
	case t.running == len(keyParts(key)):
		p.state, p.runs, p.applied = StateApplied, true, t.since
	}
	return p
}

// brakeDevices reads, for a verdict, the health and declarations of
// devices (state unset), by name. declares is the SQL that says whether
// device d.name declares one of the release's models or services, its
// arguments appended to args.
func (s *Store) brakeDevices(ctx context.Context, devices []string, declares func(args *[]any) string) (map[string]brakePart, error) {
	out := map[string]brakePart{}
	from := "devices d"
	if s.dialect == sqlite {
		from = "devices d INDEXED BY devices_verdict"
	}
	for c := range slices.Chunk(devices, partsAStatement) {
		var args []any
		decl := declares(&args)
		first := len(args) + 1
		for _, d := range c {
			args = append(args, d)
		}
		rows, err := s.db.QueryContext(ctx, `SELECT d.name, d.state, d.crash_loop, `+decl+` FROM `+from+` WHERE d.name IN (`+marks(first, len(c), 1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("%s: read devices: %w", s.display, err)
		}
		for rows.Next() {
			var name, state, loops string
			var declared int
			if err := rows.Scan(&name, &state, &loops, &declared); err != nil {
				rows.Close()
				return nil, fmt.Errorf("%s: read devices: %w", s.display, err)
			}
			p := brakePart{loops: loops != "", undeclared: declared == 0}
			p.healthy = !p.loops && state != StateError && state != StateFailed
			out[name] = p
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("%s: read devices: %w", s.display, err)
		}
	}
	return out, nil
}
