package hub

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Thresholds are a rollout's brakes, as a device sends them when it asks
// for a verdict (the hub reads no rollout).
type Thresholds struct {
	// MaxFailed and MaxFailedPercent: more failed devices than these stop
	// later waves; nil when not set. With neither set, one failure does.
	MaxFailed        *int
	MaxFailedPercent *int
	// MinApplied devices must have applied the release and stayed healthy
	// for Soak before a later wave goes.
	MinApplied int
	Soak       time.Duration
}

// BrakesVerdict is GET /v1/verdict: how a release stands in the waves
// before a device's, and whether that device may take it.
type BrakesVerdict struct {
	Revision string `json:"revision"`
	Before   int    `json:"before"`  // waves 0 to before-1 were counted
	Devices  int    `json:"devices"` // their devices the release targets
	Failed   int    `json:"failed"`  // rolled back, or in a crash loop running it
	Applied  int    `json:"applied"`
	// Soaked are the applied devices that run it, healthy, for soak.
	Soaked int  `json:"soaked"`
	Go     bool `json:"go"`
	// Tripped says failures passed a threshold: later waves stop until a
	// new commit (a fix, or a revert) makes a new release.
	Tripped bool `json:"tripped"`
	// Reason says why a device may not go: "2 of 5 wave-0 devices failed
	// main@sha1:ab12… (maxFailed 1)".
	Reason string `json:"reason,omitempty"`
}

// brakePart is one earlier-wave device's part in a release, for a verdict.
type brakePart struct {
	state   string // its part in the release (ReleaseStates)
	applied int64  // when the hub first heard it run the release, unix ns; 0 if never
	runs    bool   // it runs the release now
	healthy bool   // its last report: no error, no crash loop
	loops   bool   // a service in a crash loop
}

// judge gives the verdict on rev in waves before `before` by parts, at now.
func judge(rev string, before int, parts []brakePart, th Thresholds, now time.Time) BrakesVerdict {
	v := BrakesVerdict{Revision: rev, Before: before}
	for _, p := range parts {
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
	who := "wave-0 devices"
	if before > 1 {
		who = fmt.Sprintf("devices in waves 0-%d", before-1)
	}
	name := shortRevision(rev)
	if name != rev {
		name += "…"
	}
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
	case v.Soaked < th.MinApplied && th.Soak > 0:
		v.Reason = fmt.Sprintf("%d of %d %s ran %s healthy for %s (minApplied %d)", v.Soaked, v.Devices, who, name, th.Soak, th.MinApplied)
	case v.Soaked < th.MinApplied:
		v.Reason = fmt.Sprintf("%d of %d %s applied %s (minApplied %d)", v.Soaked, v.Devices, who, name, th.MinApplied)
	default:
		v.Go = true
	}
	return v
}

// Verdict judges release rev in the waves before `before` under th, at now.
func (s *Store) Verdict(ctx context.Context, rev string, before int, th Thresholds, now time.Time) (BrakesVerdict, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT r.state, r.applied_at, d.applied, d.state, d.crash_loop
		FROM device_releases r JOIN devices d ON d.name = r.device
		WHERE r.revision = $1 AND r.wave >= 0 AND r.wave < $2`, rev, before)
	if err != nil {
		return BrakesVerdict{}, fmt.Errorf("%s: read release %q: %w", s.display, rev, err)
	}
	defer rows.Close()
	var parts []brakePart
	for rows.Next() {
		var p brakePart
		var applied, state, loops string
		if err := rows.Scan(&p.state, &p.applied, &applied, &state, &loops); err != nil {
			return BrakesVerdict{}, fmt.Errorf("%s: read release %q: %w", s.display, rev, err)
		}
		p.runs = applied == rev
		p.loops = loops != ""
		p.healthy = !p.loops && state != StateError && state != StateFailed
		parts = append(parts, p)
	}
	if err := rows.Err(); err != nil {
		return BrakesVerdict{}, fmt.Errorf("%s: read release %q: %w", s.display, rev, err)
	}
	return judge(rev, before, parts, th, now), nil
}

// parseVerdictQuery reads GET /v1/verdict's query: revision, before, and
// the thresholds maxFailed, maxFailedPercent, minApplied, soak.
func parseVerdictQuery(q url.Values) (rev string, before int, th Thresholds, err error) {
	rev = q.Get("revision")
	if rev == "" {
		return "", 0, th, fmt.Errorf("revision: missing: the release asked about, ref@sha1:commit")
	}
	num := func(name string, lo, hi int) (*int, error) {
		raw := q.Get(name)
		if raw == "" {
			return nil, nil
		}
		n, err := strconv.Atoi(raw)
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%s %q: use a whole number from %d to %d", name, raw, lo, hi)
		}
		return &n, nil
	}
	b, err := num("before", 1, 1<<20)
	if err != nil {
		return "", 0, th, err
	}
	if b == nil {
		return "", 0, th, fmt.Errorf("before: missing: the asking device's wave; waves 0 to before-1 are counted")
	}
	if th.MaxFailed, err = num("maxFailed", 0, 1<<30); err != nil {
		return "", 0, th, err
	}
	if th.MaxFailedPercent, err = num("maxFailedPercent", 0, 100); err != nil {
		return "", 0, th, err
	}
	m, err := num("minApplied", 0, 1<<30)
	if err != nil {
		return "", 0, th, err
	}
	if m != nil {
		th.MinApplied = *m
	}
	if raw := q.Get("soak"); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 {
			return "", 0, th, fmt.Errorf("soak %q: use a duration such as 10m", raw)
		}
		th.Soak = d
	}
	return rev, *b, th, nil
}

// VerdictQuery is the query of GET /v1/verdict for rev, asked by a device
// of wave `wave` under th.
func VerdictQuery(rev string, wave int, th Thresholds) url.Values {
	q := url.Values{"revision": {rev}, "before": {strconv.Itoa(wave)}}
	if th.MaxFailed != nil {
		q.Set("maxFailed", strconv.Itoa(*th.MaxFailed))
	}
	if th.MaxFailedPercent != nil {
		q.Set("maxFailedPercent", strconv.Itoa(*th.MaxFailedPercent))
	}
	if th.MinApplied > 0 {
		q.Set("minApplied", strconv.Itoa(th.MinApplied))
	}
	if th.Soak > 0 {
		q.Set("soak", th.Soak.String())
	}
	return q
}

// apiVerdict is GET /v1/verdict: the brakes' verdict on a release in the
// waves before the asking device's. A verdict that finds the brakes
// tripped posts to the webhook, once per release.
func (s *Server) apiVerdict(w http.ResponseWriter, r *http.Request) {
	rev, before, th, err := parseVerdictQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err, true)
		return
	}
	v, err := s.store.Verdict(r.Context(), rev, before, th, s.opts.Now())
	if err != nil {
		s.fail(w, r, err, false)
		return
	}
	if v.Tripped {
		s.webhook.tripped(v)
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
				h(w, r)
				return
			}
		}
		read(w, r)
	}
}
