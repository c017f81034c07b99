package hub

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/tend-dev/tend/agent/status"
)

// Device states, worst first: what the fleet page counts and colours.
const (
	StateFailed  = "failed"  // its target release was rolled back (quarantined) on it
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
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels"`
	Applied   string            `json:"appliedRevision"`
	Target    string            `json:"targetRevision"`
	State     string            `json:"state"`
	Held      string            `json:"held,omitempty"`
	Wave      *int              `json:"wave,omitempty"` // the rollout wave a hold named; absent when none did
	LastError string            `json:"lastError,omitempty"`
	// LastReconcile is the device's last tick; LastSeen when the hub last
	// took a report of it; FirstSeen its first report. RFC 3339.
	LastReconcile string `json:"lastReconcile"`
	LastSeen      string `json:"lastSeen"`
	FirstSeen     string `json:"firstSeen"`
}

// Event is one change of a device's part in a release, derived from two
// successive reports.
type Event struct {
	At       string `json:"at"` // RFC 3339, when the hub took the report
	Kind     string `json:"kind"`
	Revision string `json:"revision,omitempty"`
	Detail   string `json:"detail,omitempty"`
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

// quarantined is the record of rev rolled back on the device, or nil.
func quarantined(s *status.Status, rev string) *status.Quarantined {
	for i := range s.Quarantined {
		if q := &s.Quarantined[i]; q.Revision == rev || q.Release == rev {
			return q
		}
	}
	return nil
}

// deviceState is the state of a device by its status.
func deviceState(s *status.Status) string {
	t := target(s)
	switch {
	case t != "" && t != s.AppliedRevision && quarantined(s, t) != nil:
		return StateFailed
	case s.LastError != "":
		return StateError
	case s.Held != "":
		return StateHeld
	case s.Staging != nil:
		return StateStaging
	case t != s.AppliedRevision:
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

// releaseState is a device's part in release rev by its status: applied,
// failed, held, staging, error or pending.
func releaseState(s *status.Status, rev string) string {
	switch {
	case rev == s.AppliedRevision:
		return StateApplied
	case quarantined(s, rev) != nil:
		return StateFailed
	case rev != target(s):
		return "" // superseded: no longer this device's business
	case s.LastError != "":
		return StateError
	case s.Held != "":
		return StateHeld
	case s.Staging != nil:
		return StateStaging
	}
	return StatePending
}

// events are what changed from prev (nil for a device's first report) to
// next, in order.
func events(prev, next *status.Status) []Event {
	var out []Event
	add := func(kind, rev, detail string) { out = append(out, Event{Kind: kind, Revision: rev, Detail: detail}) }
	if prev == nil {
		add(EventFirstSeen, next.AppliedRevision, "")
		prev = &status.Status{AppliedRevision: next.AppliedRevision}
	}
	t := target(next)
	if next.AppliedRevision != prev.AppliedRevision && next.AppliedRevision != "" {
		add(EventApplied, next.AppliedRevision, "")
	}
	if next.Staging != nil && (prev.Staging == nil || prev.Staging.Revision != next.Staging.Revision) {
		add(EventStaging, next.Staging.Revision, "")
	}
	if next.Held != "" && (next.Held != prev.Held || t != target(prev)) {
		detail := next.Held
		if w := heldWave(next.Held); w >= 0 {
			detail = fmt.Sprintf("%s (wave %d)", next.Held, w)
		}
		add(EventHeld, t, detail)
	}
	for _, q := range next.Quarantined {
		if quarantined(prev, q.Release) == nil {
			add(EventFailed, q.Revision, "rolled back: "+q.Reason)
		}
	}
	if next.LastError != "" && next.LastError != prev.LastError {
		add(EventError, t, next.LastError)
	}
	for _, r := range next.Resources {
		if r.State == status.StateDrifted && !drifted(prev, r.ID) {
			add(EventDrift, next.AppliedRevision, r.ID+": "+r.Message)
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
