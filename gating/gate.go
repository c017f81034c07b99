package gating

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tend-dev/tend/source"
)

// gateTimeout bounds one question to a rollout's gate, and to the
// brakes' hub, unless the Decider says otherwise.
const gateTimeout = 10 * time.Second

// askGate asks a rollout's gate (raw, its URL) whether the device, of
// wave, takes commit: it returns "" to go, or why the release waits; it
// is asked again at the next tick. A gate that does not answer holds the
// release and is then left alone for a while (see serverDown.rests): the
// ticks in between hold it with the same reason without asking. A gate
// is known by the URL it is asked at, so a new commit asks at once.
func (g *Decider) askGate(ctx context.Context, t *tick, raw string, wave int, commit string) string {
	u := gateURL(raw, t.Config.Device, wave, commit)
	why, _ := g.gateDown.ask(u, bound(g.GateTimeout), t.now, func(wait time.Duration) (string, bool) {
		return getGate(ctx, u, wait)
	})
	return why
}

// bound is the bound of one question: timeout, or gateTimeout when zero.
func bound(timeout time.Duration) time.Duration {
	if timeout > 0 {
		return timeout
	}
	return gateTimeout
}

// gateURL is a gate's URL raw with {revision} (the commit), {device} and
// {wave} filled in.
func gateURL(raw, device string, wave int, commit string) string {
	return strings.NewReplacer("{revision}", url.QueryEscape(commit), "{device}", url.QueryEscape(device),
		"{wave}", strconv.Itoa(wave)).Replace(raw)
}

// getGate GETs a gate's URL u, waiting no longer than wait: 200 means go,
// and it returns "". Any other answer, or none, says why the release
// waits. answered is false when the gate could not be reached or did not
// answer in time.
func getGate(ctx context.Context, u string, wait time.Duration) (why string, answered bool) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "gate " + source.RedactURL(u) + ": " + err.Error(), true
	}
	resp, err := gateClient.Do(req)
	if err != nil {
		var refused *gateRefusal
		if errors.As(err, &refused) {
			return "gate " + source.RedactURL(u) + ": " + refused.Error(), true
		}
		return "gate did not answer: " + source.RedactURL(u), false
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if err != nil {
		// A gate that stalls after its status line is one that does not
		// answer: left alone for the back-off, as one that hangs is.
		return "gate did not answer: " + source.RedactURL(u), false
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("gate answered %d", resp.StatusCode), true
	}
	return "", true
}

// gateClient asks gates: it follows a redirect only to the same scheme and
// host, and never connects to a link-local address (169.254.0.0/16,
// fe80::/10: a cloud's metadata service is no gate).
var gateClient = &http.Client{
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
			return &gateRefusal{fmt.Sprintf("redirected to another origin, %s://%s; a gate answers itself", req.URL.Scheme, req.URL.Host)}
		}
		if len(via) >= 10 {
			return &gateRefusal{"more than 10 redirects"}
		}
		return nil
	},
	Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{Timeout: gateTimeout, Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if ip := net.ParseIP(host); err == nil && ip != nil && (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) {
				return &gateRefusal{fmt.Sprintf("%s is a link-local address; a gate may not be there", host)}
			}
			return nil
		}}).DialContext,
		TLSHandshakeTimeout: gateTimeout,
	},
}

// gateRefusal is a gate that tend refused to ask: it holds the release
// like a gate that says no.
type gateRefusal struct{ msg string }

func (e *gateRefusal) Error() string { return e.msg }
