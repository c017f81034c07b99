package rollout

import (
	"fmt"
	"time"

	"github.com/tend-dev/tend/manifest"
)

// Causes of a held release, the reason label of tend_release_held.
const (
	CauseWave   = "wave"
	CauseWindow = "window"
	CausePaused = "paused"
	CauseGate   = "gate"
	// CauseBrakes is a release that failed in too many devices of the
	// earlier waves, or was not yet applied by enough of them, as the
	// rollout's hub counts them. Decide never returns it; the agent
	// (package gating) asks the hub once Decide lets a release through.
	CauseBrakes = "brakes"
	// CauseQuarantined is a release the node itself holds: the newest
	// version of a model was rolled back on this node. Decide never
	// returns it; model resolution passes over such versions.
	CauseQuarantined = "quarantined"
	// CauseLock is a release that would stop or restart a service while
	// a process holds that service's update lock. Decide never returns
	// it; the agent (package gating) probes the lock once a release is
	// let through.
	CauseLock = "lock"
)

// Causes are every cause of a release held at a tick, in the order they
// are checked: Decide's, then the brakes, the gate and the update locks,
// which the agent (package gating) asks once Decide lets a release
// through.
var Causes = []string{CausePaused, CauseWave, CauseWindow, CauseBrakes, CauseGate, CauseLock}

// Decision is whether a device takes a release now.
type Decision struct {
	Take   bool
	Cause  string    // held: one of the Causes
	Reason string    // held: what a user reads, "held: rollout paused"
	Wave   int       // the device's wave, or NoWave
	Opens  time.Time // held by a wave or window: when it opens; zero if not known
}

// Decide says whether device, with labels, takes at now a release it first
// saw at firstSeen, under r (nil: at once). A paused rollout holds it; then
// the device's wave, until firstSeen plus its after; then the window,
// until it opens. Drift reverts are not releases and are never decided
// here.
func Decide(now, firstSeen time.Time, device string, labels map[string]string, r *manifest.Rollout) Decision {
	if r == nil {
		return Decision{Take: true}
	}
	wave, after := Wave(device, labels, r)
	d := Decision{Wave: wave}
	switch {
	case r.Spec.Paused:
		d.Cause, d.Reason = CausePaused, "held: rollout paused"
	case wave == NoWave:
		d.Cause = CauseWave
		d.Reason = fmt.Sprintf("held: in no wave of rollout/%s (the device's bucket, %d, is past its last percent)", r.Metadata.Name, Bucket(device))
	case after > 0 && now.Before(firstSeen.Add(after)):
		d.Cause, d.Opens = CauseWave, firstSeen.Add(after)
		d.Reason = fmt.Sprintf("held: rollout wave %d opens %s", wave, utc(d.Opens))
	default:
		if w := r.Spec.Window; w != nil {
			if open, next := windowOpen(w, now); !open {
				d.Cause, d.Opens = CauseWindow, next
				d.Reason = fmt.Sprintf("held: outside maintenance window (opens %s)", local(w, now, next))
				if next.IsZero() {
					d.Reason = fmt.Sprintf("held: maintenance window %q never opens; fix spec.window.schedule of rollout/%s", w.Schedule, r.Metadata.Name)
				}
				return d
			}
		}
		d.Take = true
	}
	return d
}

// windowOpen reports whether w is open at now; if not, next is when it
// opens. The window that opened last before now is open while now is
// before its start plus the duration.
func windowOpen(w *manifest.Window, now time.Time) (open bool, next time.Time) {
	start := w.Cron.Next(now.Add(-w.Duration.D()).In(location(w)))
	if start.IsZero() {
		return false, start // a schedule that never fires (30 February) is a window never open
	}
	if !start.After(now) {
		return true, start
	}
	return false, start
}

func location(w *manifest.Window) *time.Location {
	if w.Location == nil {
		return time.UTC
	}
	return w.Location
}

// utc writes t as 2026-12-03T14:00Z, with seconds only when it has some;
// a fraction of a second rounds up, so a wave never opens after the time
// its reason names.
func utc(t time.Time) string {
	if f := t.Truncate(time.Second); !f.Equal(t) {
		t = f.Add(time.Second)
	}
	t = t.UTC()
	if t.Second() != 0 {
		return t.Format("2006-01-02T15:04:05Z")
	}
	return t.Format("2006-01-02T15:04Z")
}

// local writes t in w's time zone: 02:00 Europe/Berlin, with the date when
// it is a day or more after now.
func local(w *manifest.Window, now, t time.Time) string {
	zone := w.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	layout := "15:04"
	if t.Sub(now) >= 24*time.Hour {
		layout = "2006-01-02 15:04"
	}
	return t.In(location(w)).Format(layout) + " " + zone
}
