package gating

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/rollout"
	"github.com/tend-dev/tend/source"
)

// maxVerdictBytes caps what the agent reads of a hub's verdict.
const maxVerdictBytes = 64 << 10

// maxHubText bounds the text of a hub's answer (a verdict's reason, the
// first line of an error) that the agent puts in a plan, a log line and
// the status (see printable.Cut).
const maxHubText = 200

// askBrakes asks the hub of ro's brakes b for the verdict on release revision in the
// waves before wave (> 0). It returns "" to go, or why the release waits
// ("2 of 5 wave-0 devices failed main@sha1:ab12… (maxFailed 1)"); it is
// asked again at the next tick, and a verdict is never reused: a "go" is
// taken by the tick that hears it, or asked for again. A hub that does
// not answer, or answers 5xx, holds the release unless b says onHubDown:
// proceed, and is then left alone for a while (see serverDown.rests): the
// ticks in between decide as onHubDown says without asking, with the
// same reason.
func (g *Decider) askBrakes(ctx context.Context, t *tick, ro *manifest.Rollout, wave int, key api.ReleaseKey, revision string) string {
	b := ro.Spec.Brakes
	down := func(why string) string {
		if b.OnHubDown == manifest.OnHubDownProceed {
			t.logger().Warn("the brakes' hub did not answer; the release goes on (onHubDown: proceed)",
				keyDevice, t.Config.Device, keyRevision, revision, keyReason, why)
			return ""
		}
		return why + " (onHubDown: hold)"
	}
	why, hubIsDown := g.brakesDown.ask(b.Hub, bound(g.HubTimeout), t.now, func(wait time.Duration) (string, bool) {
		return askHub(ctx, t.Config.Report, b, rollout.BrakesQuery(ro, wave, key, revision), wait)
	})
	if hubIsDown {
		return down(why)
	}
	return why
}

// askHub asks b's hub q, waiting no longer than wait, with the device's
// report token when rep (the agent config's report) has a tokenFile and
// its url is on the same hub (scheme and host): a token is never sent where the agent does
// not report. It returns "" to go or why the release waits, and whether
// the hub answered: a hub that could not be reached, did not answer in
// time, or answered 5xx did not. What the hub wrote is printed escaped
// and cut (see printable.Cut), and a verdict that says go and tripped holds.
func askHub(ctx context.Context, rep *manifest.Report, b *manifest.Brakes, q api.VerdictQuery, wait time.Duration) (why string, answered bool) {
	u := strings.TrimSuffix(b.Hub, "/") + "/v1/verdict?" + q.Encode()
	shown := source.RedactURL(b.Hub)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "hub " + shown + ": " + err.Error(), true
	}
	heldBack := false
	if rep != nil && rep.TokenFile != "" && !sameOrigin(rep.URL, b.Hub) {
		heldBack = true
	}
	if rep != nil && rep.TokenFile != "" && sameOrigin(rep.URL, b.Hub) {
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
		return fmt.Sprintf("hub %s refused the device: set report.tokenFile to the token tend-hub token create printed", shown), true
	case resp.StatusCode != http.StatusOK:
		first, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		return fmt.Sprintf("hub %s answered %d: %s", shown, resp.StatusCode, printable.Cut(first, maxHubText)), true
	case len(body) > maxVerdictBytes:
		return fmt.Sprintf("hub %s answered more than %d bytes", shown, maxVerdictBytes), true
	}
	var v api.Verdict // the agent reads Go, Tripped and Reason
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Sprintf("hub %s: not a verdict: %v", shown, err), true
	}
	switch {
	case v.Go && v.Tripped:
		// A hub that says both is broken or not the hub it claims to be:
		// a release does not go on an answer that contradicts itself.
		return fmt.Sprintf("the hub's verdict is contradictory (go and tripped): %s", shown), true
	case v.Go:
		return "", true
	case v.Reason == "":
		return "the hub says wait", true
	}
	return printable.Cut(v.Reason, maxHubText), true
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
