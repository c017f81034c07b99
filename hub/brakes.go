package hub

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tend-dev/tend/rollout"
)

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
func judge(rev string, before int, parts []brakePart, th rollout.Thresholds, now time.Time) BrakesVerdict {
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

// Verdict judges q's release in the waves before q.Before under q's
// thresholds, at now.
func (s *Store) Verdict(ctx context.Context, q rollout.VerdictQuery, now time.Time) (BrakesVerdict, error) {
	rev := q.Revision
	rows, err := s.db.QueryContext(ctx, `SELECT r.state, r.applied_at, d.applied, d.state, d.crash_loop
		FROM device_releases r JOIN devices d ON d.name = r.device
		WHERE r.revision = $1 AND r.wave >= 0 AND r.wave < $2`, rev, q.Before)
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
	return judge(rev, q.Before, parts, q.Thresholds, now), nil
}

// apiVerdict is GET /v1/verdict: the brakes' verdict on a release in the
// waves before the asking device's. A verdict that finds the brakes
// tripped posts to the webhook, once per release.
func (s *Server) apiVerdict(w http.ResponseWriter, r *http.Request) {
	q, err := rollout.ParseVerdictQuery(r.URL.Query())
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
