package hub

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/api"
)

// Device states, worst first: what the fleet page counts and colours.
const (
	StateFailed  = "failed"  // a part of its target release was rolled back (quarantined) on it
	StateError   = "error"   // its last tick failed
	StateHeld    = "held"    // a rollout, gate or update lock holds its target
	StateStaging = "staging" // its target downloads in the background
	StateDrifted = "drifted" // runs its target, with drift being reverted
	StatePending = "pending" // has a target it has not applied, for no reason given
	StateApplied = "applied" // runs its target
)

// StateSuperseded is a device's part in a release it never applied nor
// failed, whose target moved on to a newer one first.
const StateSuperseded = "superseded"

// ReleaseStates lists a device's parts in a release, worst first.
var ReleaseStates = []string{StateFailed, StateError, StateHeld, StateStaging, StatePending, StateApplied, StateSuperseded, StateUnreported}

// StateUnreported counts, in a release, the devices following its ref
// that have not reported it yet: down, or not ticked since.
const StateUnreported = "unreported"

// States lists the device states, worst first.
var States = []string{StateFailed, StateError, StateHeld, StateStaging, StateDrifted, StatePending, StateApplied}

// Device is a device as the hub last heard of it.
type Device struct {
	Name    string            `json:"name"`
	Labels  map[string]string `json:"labels"`
	Applied string            `json:"appliedRevision"`
	Target  string            `json:"targetRevision"`
	// AppliedRelease is the key of the release the device runs;
	// TargetRelease of the one it works towards, or runs when none waits
	// (see api.ReleaseKey).
	AppliedRelease string `json:"appliedRelease,omitempty"`
	TargetRelease  string `json:"targetRelease,omitempty"`
	State          string `json:"state"`
	Held           string `json:"held,omitempty"`
	// Wave is the device's wave in Rollout, the rollout that governs it:
	// as the hub worked them out from the fleet repo (--fleet-source),
	// else as the device reported them, or the wave a hold named. Absent
	// in no wave, or when neither is known.
	Wave      *int   `json:"wave,omitempty"`
	Rollout   string `json:"rollout,omitempty"`
	LastError string `json:"lastError,omitempty"`
	// LastReconcile is the device's last tick; LastSeen when the hub last
	// took a report of it; FirstSeen its first report. RFC 3339.
	LastReconcile string `json:"lastReconcile"`
	LastSeen      string `json:"lastSeen"`
	FirstSeen     string `json:"firstSeen"`
}

// TargetShown is the device table's target: the key of a release of new
// digests the device works towards and does not run yet (a retrained
// model pushed as a tag, at the commit it runs), else its target
// revision; each abbreviated.
func (d Device) TargetShown() string {
	k := api.ReleaseKey(d.TargetRelease)
	if _, commit := k.Commit(); k != "" && !commit && d.TargetRelease != d.AppliedRelease {
		return shortKey(k)
	}
	return shortRevision(d.Target)
}

// Event is one change of a device's part in a release, derived from two
// successive reports.
type Event struct {
	At       string `json:"at"` // RFC 3339, when the hub took the report
	Kind     string `json:"kind"`
	Revision string `json:"revision,omitempty"`
	// Release is the key of the release the event is about; absent from
	// events a hub of schema 2 recorded.
	Release string `json:"release,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// Event kinds.
const (
	EventFirstSeen = "first seen"
	EventStaging   = "staging"
	EventApplied   = "applied"
	EventHeld      = "held"
	EventFailed    = "failed"
	EventError     = "error"
	EventDrift     = "drift"
)

// target is the revision a status works towards: its target, or the
// applied one when none waits.
func target(s *status.Status) string {
	if s.TargetRevision != "" {
		return s.TargetRevision
	}
	return s.AppliedRevision
}

// quarantinedRelease is s's quarantine entry of release (as an entry
// names it: REF@sha1:COMMIT or ID@sha256:HEX), or nil.
func quarantinedRelease(s *status.Status, release string) *status.Quarantined {
	for i := range s.Quarantined {
		if q := &s.Quarantined[i]; q.Release == release {
			return q
		}
	}
	return nil
}

// deviceState is the state of a device by its status and its keys.
func deviceState(s *status.Status, k keys) string {
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
		if r.State == status.StateDrifted {
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
func deviceWave(s *status.Status) int {
	if s.Wave != nil {
		return max(*s.Wave, -1)
	}
	return heldWave(s.Held)
}

// crashLooping lists the services of s with a replica in a crash loop.
func crashLooping(s *status.Status) []string {
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
func newCrashLoops(prev, next *status.Status) []string {
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
func partState(s *status.Status, k keys, key api.ReleaseKey) (string, *status.Quarantined) {
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
func events(prev *status.Status, pk keys, next *status.Status, nk keys) []Event {
	var out []Event
	add := func(kind, rev string, key api.ReleaseKey, detail string) {
		out = append(out, Event{Kind: kind, Revision: rev, Release: string(key), Detail: detail})
	}
	if prev == nil {
		add(EventFirstSeen, next.AppliedRevision, nk.applied, "")
		prev = &status.Status{AppliedRevision: next.AppliedRevision}
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
		if r.State == status.StateDrifted && !drifted(prev, r.ID) {
			add(EventDrift, next.AppliedRevision, nk.applied, r.ID+": "+r.Message)
		}
	}
	return out
}

func drifted(s *status.Status, id string) bool {
	for _, r := range s.Resources {
		if r.ID == id {
			return r.State == status.StateDrifted
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
