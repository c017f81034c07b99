package hub

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/tend-dev/tend/api"
)

// target is the revision a status works towards: its target, or the
// applied one when none waits.
func target(s *api.Status) string {
	if s.TargetRevision != "" {
		return s.TargetRevision
	}
	return s.AppliedRevision
}

// quarantinedRelease is s's quarantine entry of release (as an entry
// names it: REF@sha1:COMMIT or ID@sha256:HEX), or nil.
func quarantinedRelease(s *api.Status, release string) *api.Quarantined {
	for i := range s.Quarantined {
		if q := &s.Quarantined[i]; q.Release == release {
			return q
		}
	}
	return nil
}

// deviceState is the state of a device by its status and its keys.
func deviceState(s *api.Status, k keys) string {
	switch {
	case k.target != k.applied && k.failedBy(k.target) != nil:
		return StateFailed
	case s.LastError != "":
		return StateError
	case s.Held != "":
		return StateHeld
	case s.Staging != nil:
		return StateStaging
	case target(s) != s.AppliedRevision || k.target != k.applied:
		return StatePending
	}
	for _, r := range s.Resources {
		if r.State == api.ResourceDrifted {
			return StateDrifted
		}
	}
	return StateApplied
}

// heldWave reads the wave a hold names ("held: rollout wave 2 opens …");
// -1 when it names none.
func heldWave(held string) int {
	m := waveRE.FindStringSubmatch(held)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return n
}

// deviceWave is the device's wave: the status document's, else the one a
// hold names (an agent that does not report its wave); -1 when neither says.
func deviceWave(s *api.Status) int {
	if s.Wave != nil {
		return max(*s.Wave, -1)
	}
	return heldWave(s.Held)
}

// crashLooping lists the services of s with a replica in a crash loop.
func crashLooping(s *api.Status) []string {
	var out []string
	for _, svc := range s.Services {
		for _, r := range svc.Replicas {
			if r.CrashLoop {
				out = append(out, svc.ID)
				break
			}
		}
	}
	return out
}

// newCrashLoops lists the services next finds in a crash loop that prev
// (nil: none) did not.
func newCrashLoops(prev, next *api.Status) []string {
	var was []string
	if prev != nil {
		was = crashLooping(prev)
	}
	var out []string
	for _, id := range crashLooping(next) {
		if !slices.Contains(was, id) {
			out = append(out, id)
		}
	}
	return out
}

var waveRE = regexp.MustCompile(`\bwave (\d{1,6})\b`)

// partState is a device's part in release key by its status s and its
// keys k: failed when a part of key was rolled back on it; applied when
// it runs key (its applied release, or the commit of its applied
// revision: see keys.appliedCommit); error, held, staging or pending when key is its target
// and it does not run it; "" otherwise (superseded, unless it ran or
// failed it before). The second result is the quarantine entry of a
// failure.
func partState(s *api.Status, k keys, key api.ReleaseKey) (string, *api.Quarantined) {
	if q := k.failedBy(key); q != nil {
		return StateFailed, q
	}
	switch {
	case key == k.applied, key == k.appliedCommit:
		return StateApplied, nil
	case key != k.target:
		return "", nil // superseded: no longer this device's business
	case s.LastError != "":
		return StateError, nil
	case s.Held != "":
		return StateHeld, nil
	case s.Staging != nil:
		return StateStaging, nil
	}
	return StatePending, nil
}

// events are what changed from prev (nil for a device's first report,
// pk then unused) to next, whose keys are nk, in order.
func events(prev *api.Status, pk keys, next *api.Status, nk keys) []Event {
	var out []Event
	add := func(kind, rev string, key api.ReleaseKey, detail string) {
		out = append(out, Event{Kind: kind, Revision: rev, Release: string(key), Detail: detail})
	}
	if prev == nil {
		add(EventFirstSeen, next.AppliedRevision, nk.applied, "")
		prev = &api.Status{AppliedRevision: next.AppliedRevision}
		pk = keys{applied: nk.applied, target: nk.applied}
	}
	t := target(next)
	if (next.AppliedRevision != prev.AppliedRevision && next.AppliedRevision != "") || (nk.applied != pk.applied && nk.applied != "") {
		add(EventApplied, next.AppliedRevision, nk.applied, "")
	}
	if next.Staging != nil && (prev.Staging == nil || prev.Staging.Revision != next.Staging.Revision || nk.target != pk.target) {
		add(EventStaging, next.Staging.Revision, nk.target, "")
	}
	if next.Held != "" && (next.Held != prev.Held || t != target(prev) || nk.target != pk.target) {
		detail := next.Held
		if w := heldWave(next.Held); w >= 0 {
			detail = fmt.Sprintf("%s (wave %d)", next.Held, w)
		}
		add(EventHeld, t, nk.target, detail)
	}
	for i := range next.Quarantined {
		q := &next.Quarantined[i]
		if quarantinedRelease(prev, q.Release) == nil {
			add(EventFailed, q.Revision, quarantineKey(q), "rolled back: "+q.Reason)
		}
	}
	if next.LastError != "" && next.LastError != prev.LastError {
		add(EventError, t, nk.target, next.LastError)
	}
	for _, r := range next.Resources {
		if r.State == api.ResourceDrifted && !drifted(prev, r.ID) {
			add(EventDrift, next.AppliedRevision, nk.applied, r.ID+": "+r.Message)
		}
	}
	return out
}

func drifted(s *api.Status, id string) bool {
	for _, r := range s.Resources {
		if r.ID == id {
			return r.State == api.ResourceDrifted
		}
	}
	return false
}

var deviceName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// checkDevice refuses a device name an AgentConfig could not have.
func checkDevice(name string) error {
	if len(name) > 253 || !deviceName.MatchString(name) {
		return fmt.Errorf("invalid device name %q: use letters, digits, '-', '_' and '.', as the AgentConfig's device", name)
	}
	return nil
}
