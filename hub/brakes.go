package hub

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tend-dev/tend/api"
)

// brakePart is one earlier-wave device's part in a release, for a verdict.
type brakePart struct {
	state   string // its part in the release (api.ReleaseStates)
	applied int64  // when the hub first heard it run the release, unix ns; 0 if never
	runs    bool   // it runs the release now
	healthy bool   // its last report: no error, no crash loop
	loops   bool   // a service in a crash loop
	// undeclared: its last report's target declares none of the models
	// and services a release of digests moves, as far as the hub knows
	// (see declaredIDs). It does not count, unless it failed the release.
	undeclared bool
}

// judge gives the verdict on release key, seen at revision rev, in waves
// before `before` by parts, at now. Parts of StateUnreported are devices
// that declare a release of digests and have not reported it: counted,
// not applied. Earlier waves where no device declares a release of
// digests are empty, as hawkBit skips an empty rollout group: nothing
// runs it there, and the verdict goes.
func judge(key api.ReleaseKey, rev string, before int, parts []brakePart, th api.Thresholds, now time.Time) BrakesVerdict {
	v := BrakesVerdict{Release: string(key), Revision: rev, Before: before}
	_, commit := key.Commit()
	declared := commit // an earlier device declares the release: something to wait for
	for _, p := range parts {
		if p.undeclared && p.state != StateFailed {
			continue // no longer its business
		}
		declared = true
		if p.state == StateSuperseded {
			continue
		}
		v.Devices++
		switch {
		case p.state == StateFailed, p.runs && p.loops:
			v.Failed++
		case p.state == StateApplied:
			v.Applied++
			if p.runs && p.healthy && p.applied != 0 && !now.Before(time.Unix(0, p.applied).Add(th.Soak)) {
				v.Soaked++
			}
		}
	}
	who, one := "wave-0 devices", "wave-0 device"
	if before > 1 {
		who = fmt.Sprintf("devices in waves 0-%d", before-1)
		one = fmt.Sprintf("device in waves 0-%d", before-1)
	}
	name := api.ReleaseName(key, rev)
	maxFailed := th.MaxFailed
	if maxFailed == nil && th.MaxFailedPercent == nil {
		zero := 0
		maxFailed = &zero
	}
	switch {
	case maxFailed != nil && v.Failed > *maxFailed:
		v.Tripped = true
		v.Reason = fmt.Sprintf("%d of %d %s failed %s (maxFailed %d)", v.Failed, v.Devices, who, name, *maxFailed)
	case th.MaxFailedPercent != nil && v.Failed*100 > *th.MaxFailedPercent*v.Devices:
		v.Tripped = true
		v.Reason = fmt.Sprintf("%d of %d %s failed %s (maxFailedPercent %d)", v.Failed, v.Devices, who, name, *th.MaxFailedPercent)
	case !declared:
		v.Go = true
		v.Reason = fmt.Sprintf("no %s runs %s; nothing to wait for", one, strings.Join(resourceIDsOf(key), " or "))
	case v.Soaked < th.MinApplied && th.Soak > 0:
		v.Reason = fmt.Sprintf("%d of %d %s ran %s healthy for %s (minApplied %d)", v.Soaked, v.Devices, who, name, th.Soak, th.MinApplied)
	case v.Soaked < th.MinApplied:
		v.Reason = fmt.Sprintf("%d of %d %s applied %s (minApplied %d)", v.Soaked, v.Devices, who, name, th.MinApplied)
	default:
		v.Go = true
	}
	return v
}

// resourceIDsOf are the ids of the models and services a release of
// digests moves, in order ("model/detector"); nil for a commit's.
func resourceIDsOf(key api.ReleaseKey) []string {
	if _, commit := key.Commit(); commit {
		return nil
	}
	var ids []string
	for _, p := range key.Parts() {
		if id, _, _ := strings.Cut(p, "@"); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// Verdict judges q's release (q.Key()) in the waves before q.Before under
// q's thresholds, at now. It counts each earlier device's part in that
// release, and its parts in the release's parts (see parts.go): a device
// that rolled back one of them failed it, whatever key it failed it
// under, and one that runs them all runs it, whatever keys it took them
// under. A device runs a commit's release when it is its applied release
// or the commit of its applied revision (see keys.appliedCommit). Of a
// release of digests it counts only the devices whose target declares
// one of its models or services (or whose declarations are unknown),
// and those that failed it: an earlier device that declares one and has
// not reported the release counts as not applied.
func (s *Store) Verdict(ctx context.Context, q api.VerdictQuery, now time.Time) (BrakesVerdict, error) {
	key := q.Key()
	ids := resourceIDsOf(key)
	// declares is the SQL of whether device d.name declares one of ids,
	// or whose declarations are unknown, its arguments appended to args.
	declares := func(args *[]any) string {
		if ids == nil {
			return "1"
		}
		return `CASE WHEN ` + declaresOneOf(ids, args) + ` THEN 1 ELSE 0 END`
	}
	args := []any{q.Before, string(key)}
	inRollout := rolloutIs("r", q.Rollout, &args)
	decl := declares(&args)
	// The indexes cover the query: a device's row, with its status, is
	// never read. SQLite's planner, with no statistics, would take the
	// primary key's index instead.
	devices := "devices d"
	if s.dialect == sqlite {
		devices = "devices d INDEXED BY devices_verdict"
	}
	rows, err := s.db.QueryContext(ctx, `SELECT r.device, r.state, r.applied_at, d.applied_release, d.applied_commit, d.state, d.crash_loop, `+decl+`
		FROM device_releases r JOIN `+devices+` ON d.name = r.device
		WHERE r.release_key = $2 AND `+inRollout+` AND r.wave >= 0 AND r.wave < $1`, args...)
	if err != nil {
		return BrakesVerdict{}, fmt.Errorf("%s: read release %q: %w", s.display, key, err)
	}
	defer rows.Close()
	byDevice := map[string]brakePart{}
	for rows.Next() {
		var p brakePart
		var device, applied, appliedCommit, state, loops string
		var declared int
		if err := rows.Scan(&device, &p.state, &p.applied, &applied, &appliedCommit, &state, &loops, &declared); err != nil {
			return BrakesVerdict{}, fmt.Errorf("%s: read release %q: %w", s.display, key, err)
		}
		p.runs = applied == string(key) || appliedCommit == string(key)
		p.loops = loops != ""
		p.healthy = !p.loops && state != StateError && state != StateFailed
		p.undeclared = declared == 0
		byDevice[device] = p
	}
	if err := rows.Err(); err != nil {
		return BrakesVerdict{}, fmt.Errorf("%s: read release %q: %w", s.display, key, err)
	}
	tallies, err := s.partsBefore(ctx, key, q.Rollout, q.Before)
	if err != nil {
		return BrakesVerdict{}, err
	}
	var uncounted []string // devices its parts count, with no part in key itself
	for device, t := range tallies {
		if _, ok := byDevice[device]; !ok && t.counts(key) {
			uncounted = append(uncounted, device)
		}
	}
	others, err := s.brakeDevices(ctx, uncounted, declares)
	if err != nil {
		return BrakesVerdict{}, err
	}
	for device, t := range tallies {
		p, ok := byDevice[device]
		if !ok {
			if p, ok = others[device]; !ok {
				continue
			}
		}
		byDevice[device] = t.merge(p, key)
	}
	parts := slices.Collect(maps.Values(byDevice))
	if ids != nil {
		unreported, err := s.unreportedBefore(ctx, key, ids, q.Rollout, q.Before)
		if err != nil {
			return BrakesVerdict{}, err
		}
		for _, device := range unreported {
			if _, counted := byDevice[device]; !counted {
				parts = append(parts, brakePart{state: StateUnreported})
			}
		}
	}
	v := judge(key, q.Revision, q.Before, parts, q.Thresholds, now)
	v.Rollout = q.Rollout
	return v, nil
}

// unreportedBefore lists the devices of waves 0..before-1 whose target
// declares one of ids, the models and services release key moves, or
// whose declarations are unknown, and that have not reported key: down,
// or not ticked since it was pushed. Two indexes cover the query, as the
// verdict's.
func (s *Store) unreportedBefore(ctx context.Context, key api.ReleaseKey, ids []string, ro string, before int) ([]string, error) {
	args := []any{before, string(key)}
	inRollout := rolloutIs("d", ro, &args)
	declares := declaresOneOf(ids, &args)
	devices := "devices d"
	if s.dialect == sqlite {
		devices = "devices d INDEXED BY devices_wave"
		if ro != "" {
			devices = "devices d INDEXED BY devices_rollout_wave"
		}
	}
	rows, err := s.db.QueryContext(ctx, `SELECT d.name FROM `+devices+` WHERE `+inRollout+` AND d.wave >= 0 AND d.wave < $1
		AND `+declares+`
		AND NOT EXISTS (SELECT 1 FROM device_releases r WHERE r.device = d.name AND r.release_key = $2)`, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: read the devices of release %q: %w", s.display, key, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var device string
		if err := rows.Scan(&device); err != nil {
			return nil, fmt.Errorf("%s: read the devices of release %q: %w", s.display, key, err)
		}
		out = append(out, device)
	}
	return out, rows.Err()
}

// rolloutIs is the SQL condition that the row of table alias t is of
// rollout ro, or of no rollout known (a row of schema 3, or of a tend that
// reports none), its argument appended to args; always true for ro ""
// (the question of a tend that names no rollout).
func rolloutIs(t, ro string, args *[]any) string {
	if ro == "" {
		return "1 = 1"
	}
	*args = append(*args, ro)
	return fmt.Sprintf("%s.rollout IN ($%d, '')", t, len(*args))
}

// declaresOneOf is the SQL condition that device d.name declares one of
// ids, or that its declarations are unknown (see keys.resourceIDs), its
// arguments appended to args.
func declaresOneOf(ids []string, args *[]any) string {
	marks := make([]string, len(ids))
	for i, id := range ids {
		*args = append(*args, id)
		marks[i] = fmt.Sprintf("$%d", len(*args))
	}
	return `(d.resources_unknown = 1 OR EXISTS (SELECT 1 FROM device_resources x WHERE x.device = d.name AND x.resource_id IN (` + strings.Join(marks, ", ") + `)))`
}

// apiVerdict is GET /v1/verdict: the brakes' verdict on a release in the
// waves before the asking device's. A verdict that finds the brakes
// tripped posts to the webhook, once per release.
func (s *Server) apiVerdict(w http.ResponseWriter, r *http.Request) {
	q, err := api.ParseVerdictQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err, true)
		return
	}
	v, err := s.store.Verdict(r.Context(), q, s.opts.Now())
	if err != nil {
		s.fail(w, r, err, false)
		return
	}
	if v.Tripped {
		s.webhook.tripped(r.Context(), askerOf(r.Context()), v)
	}
	writeJSON(w, v)
}

// readOrDevice guards an endpoint devices read too: the read token, or
// any device's report token, lets a request through.
func (s *Server) readOrDevice(h http.HandlerFunc) http.HandlerFunc {
	read := s.read(h)
	return func(w http.ResponseWriter, r *http.Request) {
		if tok := bearer(r); !s.opts.PublicRead && tok != "" && tok != s.opts.ReadToken && strings.HasPrefix(tok, tokenPrefix) {
			device, err := s.store.TokenDevice(r.Context(), tok)
			if err != nil {
				s.fail(w, r, err, false)
				return
			}
			if device != "" {
				h(w, r.WithContext(withAsker(r.Context(), device)))
				return
			}
		}
		read(w, r)
	}
}
