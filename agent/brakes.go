package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/rollout"
	"github.com/tend-dev/tend/source"
)

// maxVerdictBytes caps what the agent reads of a hub's verdict.
const maxVerdictBytes = 64 << 10

// hubBackoff is how long a brakes hub that did not answer is left alone
// after its n-th failure in a row: 1 minute, doubling to 5.
var hubBackoff = backoff.Exponential{Initial: time.Minute, Max: 5 * time.Minute}

// verdict is what the agent reads of the hub's GET /v1/verdict (see
// hub.BrakesVerdict).
type verdict struct {
	Go     bool   `json:"go"`
	Reason string `json:"reason"`
}

// hubDown remembers the brakes hub that last did not answer, so that a
// hub that is down or hangs costs one bounded wait a back-off
// (hubBackoff), not one a tick: every tick reverts drift, and the ticks
// in between do so without waiting for the hub.
type hubDown struct {
	mu       sync.Mutex
	hub      string    // its URL as the rollout names it; "" when every hub answered
	why      string    // how it failed: "hub did not answer: URL"
	at       time.Time // when the last question to it ended
	failures int       // in a row
	skipped  bool      // a tick decided without asking it since
	// timeout bounds one question; zero means gateTimeout. Set before
	// the first tick.
	timeout time.Duration
}

// rests reports whether hub is to be left alone at now, and if so how it
// last failed. A hub that did not answer is asked again neither by the
// next tick that would ask it nor before hubBackoff has passed (a clock
// set back before the failure has it asked at once).
func (d *hubDown) rests(hub string, now time.Time) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	passed := !now.Before(d.at.Add(hubBackoff.Delay(d.failures))) || now.Before(d.at)
	if d.hub != hub || d.skipped && passed {
		return "", false
	}
	d.skipped = true
	return d.why, true
}

// failed records that hub did not answer a question that ended at now.
func (d *hubDown) failed(hub, why string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hub != hub {
		d.hub, d.failures = hub, 0
	}
	d.why, d.at, d.skipped = why, now, false
	d.failures++
}

// answered records that hub answered.
func (d *hubDown) answered(hub string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.hub == hub {
		d.hub = ""
	}
}

// wait bounds one question to a brakes hub.
func (d *hubDown) wait() time.Duration {
	if d.timeout > 0 {
		return d.timeout
	}
	return gateTimeout
}

// askBrakes asks the hub of b for the verdict on release revision in the
// waves before wave (> 0). It returns "" to go, or why the release waits
// ("2 of 5 wave-0 devices failed main@sha1:ab12… (maxFailed 1)"); it is
// asked again at the next tick, and a verdict is never reused: a "go" is
// taken by the tick that hears it, or asked for again. A hub that does
// not answer, or answers 5xx, holds the release unless b says onHubDown:
// proceed, and is then left alone for a while (see hubDown.rests): the
// ticks in between decide as onHubDown says without asking, with the
// same reason.
func (r *Reconciler) askBrakes(ctx context.Context, b *manifest.Brakes, wave int, revision string) string {
	down := func(why string) string {
		if b.OnHubDown == manifest.OnHubDownProceed {
			r.logger().Warn("the brakes' hub did not answer; the release goes on (onHubDown: proceed)",
				keyDevice, r.Config.Device, keyRevision, revision, keyReason, why)
			return ""
		}
		return why + " (onHubDown: hold)"
	}
	if why, ok := r.brakesDown.rests(b.Hub, r.now()); ok {
		return down(why)
	}
	why, answered := r.askHub(ctx, b, rollout.BrakesQuery(b, wave, revision))
	if !answered {
		r.brakesDown.failed(b.Hub, why, r.now())
		return down(why)
	}
	r.brakesDown.answered(b.Hub)
	return why
}

// askHub asks b's hub q, with the device's report token when
// report.tokenFile names one and report.url is on the same hub (scheme
// and host): a token is never sent where the agent does not report. It
// returns "" to go or why the release waits, and whether the hub
// answered: a hub that could not be reached, did not answer in time, or
// answered 5xx did not.
func (r *Reconciler) askHub(ctx context.Context, b *manifest.Brakes, q rollout.VerdictQuery) (why string, answered bool) {
	u := strings.TrimSuffix(b.Hub, "/") + "/v1/verdict?" + q.Encode()
	shown := source.RedactURL(b.Hub)
	ctx, cancel := context.WithTimeout(ctx, r.brakesDown.wait())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "hub " + shown + ": " + err.Error(), true
	}
	heldBack := false
	if rep := r.Config.Report; rep != nil && rep.TokenFile != "" && !sameOrigin(rep.URL, b.Hub) {
		heldBack = true
	}
	if rep := r.Config.Report; rep != nil && rep.TokenFile != "" && sameOrigin(rep.URL, b.Hub) {
		tok, err := os.ReadFile(rep.TokenFile)
		if err != nil {
			return fmt.Sprintf("cannot read report.tokenFile for the hub %s: %v", shown, err), true
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := gateClient.Do(req)
	if err != nil {
		return "hub did not answer: " + shown, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxVerdictBytes+1))
	switch {
	case err != nil:
		return "hub did not answer: " + shown + ": " + err.Error(), false
	case resp.StatusCode >= 500:
		return fmt.Sprintf("hub %s answered %d", shown, resp.StatusCode), false
	case resp.StatusCode == http.StatusUnauthorized && heldBack:
		return fmt.Sprintf("hub %s refused the device: report.url is not on the brakes hub's scheme and host, so no token was sent; report to the same hub, or run it with --public-read", shown), true
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Sprintf("hub %s refused the device: set report.tokenFile to the token tend hub token create printed", shown), true
	case resp.StatusCode != http.StatusOK:
		first, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		return fmt.Sprintf("hub %s answered %d: %.200s", shown, resp.StatusCode, first), true
	case len(body) > maxVerdictBytes:
		return fmt.Sprintf("hub %s answered more than %d bytes", shown, maxVerdictBytes), true
	}
	var v verdict
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Sprintf("hub %s: not a verdict: %v", shown, err), true
	}
	switch {
	case v.Go:
		return "", true
	case v.Reason == "":
		return "the hub says wait", true
	}
	return v.Reason, true
}

// sameOrigin reports whether URLs a and b have the same scheme and host.
func sameOrigin(a, b string) bool {
	ua, err := url.Parse(a)
	if err != nil {
		return false
	}
	ub, err := url.Parse(b)
	return err == nil && ua.Scheme == ub.Scheme && strings.EqualFold(ua.Host, ub.Host)
}
