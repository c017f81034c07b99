package gating

import (
	"sync"
	"time"

	"github.com/tend-dev/tend/internal/backoff"
)

// ServerDownBackoff is how long a server the agent asks before taking a
// release (a brakes hub, a rollout's gate) is left alone after its n-th
// failure in a row to answer: 1 minute, doubling to 5.
var ServerDownBackoff = backoff.Exponential{Initial: time.Minute, Max: 5 * time.Minute}

// serverDown remembers the server that last did not answer a question,
// by its URL (a brakes hub's as the rollout names it, a gate's as it was
// asked, {revision} filled in), so that a server that is down or hangs
// costs one bounded wait a back-off (ServerDownBackoff), not one a tick:
// every tick reverts drift, and the ticks in between do so without
// waiting for it. A Decider keeps one for its brakes hub and one for its
// gate.
type serverDown struct {
	mu       sync.Mutex
	url      string    // "" when the last question was answered
	why      string    // how it failed: "gate did not answer: URL"
	at       time.Time // when the last question to it ended
	failures int       // in a row
	skipped  bool      // a tick decided without asking it since
}

// ask asks the server at url by calling question with wait, the bound of
// one question, unless url rests (see rests), and records whether it
// answered. It returns why the release waits ("" to go) and whether the
// server is down: resting, or it did not answer this question; why is
// then how it failed.
func (d *serverDown) ask(url string, wait time.Duration, now func() time.Time, question func(wait time.Duration) (why string, answered bool)) (string, bool) {
	if why, ok := d.rests(url, now()); ok {
		return why, true
	}
	why, answered := question(wait)
	if !answered {
		d.failed(url, why, now())
		return why, true
	}
	d.answered(url)
	return why, false
}

// rests reports whether url is to be left alone at now, and if so how it
// last failed. A server that did not answer is asked again neither by
// the next tick that would ask it nor before ServerDownBackoff has
// passed (a clock set back before the failure has it asked at once).
func (d *serverDown) rests(url string, now time.Time) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	passed := !now.Before(d.at.Add(ServerDownBackoff.Delay(d.failures))) || now.Before(d.at)
	if d.url != url || d.skipped && passed {
		return "", false
	}
	d.skipped = true
	return d.why, true
}

// failed records that url did not answer a question that ended at now.
func (d *serverDown) failed(url, why string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.url != url {
		d.url, d.failures = url, 0
	}
	d.why, d.at, d.skipped = why, now, false
	d.failures++
}

// answered records that url answered.
func (d *serverDown) answered(url string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.url == url {
		d.url = ""
	}
}
