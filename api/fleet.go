package api

import "encoding/json"

// The hub's JSON answers (GET /v1/devices, /v1/devices/{name},
// /v1/releases, /v1/releases/{name}): what the hub writes and tend fleet
// reads.

// Device states, worst first: what the fleet page counts and colours.
// A device's part in a release takes these too, and StateSuperseded and
// StateUnreported.
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

// StateUnreported counts, in a release, the devices following its ref
// that have not reported it yet: down, or not ticked since.
const StateUnreported = "unreported"

// States lists the device states, worst first.
var States = []string{StateFailed, StateError, StateHeld, StateStaging, StateDrifted, StatePending, StateApplied}

// ReleaseStates lists a device's parts in a release, worst first.
var ReleaseStates = []string{StateFailed, StateError, StateHeld, StateStaging, StatePending, StateApplied, StateSuperseded, StateUnreported}

// Device is a device as the hub last heard of it.
type Device struct {
	Name    string            `json:"name"`
	Labels  map[string]string `json:"labels"`
	Applied string            `json:"appliedRevision"`
	Target  string            `json:"targetRevision"`
	// AppliedRelease is the key of the release the device runs;
	// TargetRelease of the one it works towards, or runs when none waits
	// (see ReleaseKey).
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
	k := ReleaseKey(d.TargetRelease)
	if _, commit := k.Commit(); k != "" && !commit && d.TargetRelease != d.AppliedRelease {
		return k.Short()
	}
	return ShortRevision(d.Target)
}

// MaxPageSize bounds the devices of a page of GET /v1/devices
// (?limit=): a hub refuses more.
const MaxPageSize = 1000

// DeviceList is a page of the device table: GET /v1/devices.
type DeviceList struct {
	FormatVersion string `json:"formatVersion"`
	Selector      string `json:"selector,omitempty"`
	// Total is how many devices the selector matches; Counts, how many of
	// them are in each state.
	Total   int            `json:"total"`
	Counts  map[string]int `json:"counts"`
	Offset  int            `json:"offset"`
	Devices []Device       `json:"devices"`
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

// DeviceDetail is GET /v1/devices/{name}: a device with its last status
// document (a Status, as the device posted it) and its recent events,
// newest first.
type DeviceDetail struct {
	Device Device          `json:"device"`
	Events []Event         `json:"events"`
	Status json.RawMessage `json:"status"`
}

// ReleaseSummary is a release and how many devices are in each state of
// it.
type ReleaseSummary struct {
	// Key is what made the release new on its devices (see ReleaseKey);
	// Revision the fleet revision the hub first saw it at.
	Key      string `json:"key"`
	Revision string `json:"revision"`
	// Resources are its models and container images as the first device
	// that reported it as its target resolved them (refs, tags, digests);
	// empty when only a tend that sends none (v0.1.0) reported it.
	Resources []ReleaseResource `json:"resources"`
	FirstSeen string            `json:"firstSeen"` // the fleet's first report naming it
	Devices   int               `json:"total"`     // devices it targets (superseded ones left out)
	Counts    map[string]int    `json:"counts"`
}

// Tags are the tags the release's own digests were resolved through, as
// "ID TAG": "model/detector 1.2.0".
func (r ReleaseSummary) Tags() []string {
	var out []string
	parts := ReleaseKey(r.Key).Parts()
	for _, res := range r.Resources {
		for _, p := range parts {
			if res.Tag != "" && p == res.ID+"@"+res.Digest {
				out = append(out, res.ID+" "+res.Tag)
			}
		}
	}
	return out
}

// ReleaseList is GET /v1/releases: the newest releases, newest first.
type ReleaseList struct {
	FormatVersion string           `json:"formatVersion"`
	Releases      []ReleaseSummary `json:"releases"`
}

// ReleaseDevice is one device's part in a release.
type ReleaseDevice struct {
	Device string `json:"device"`
	State  string `json:"state"`
	Wave   *int   `json:"wave,omitempty"`
	// Applied is when the hub first heard the device run it; AfterSeconds
	// how long after the release's first sight that was.
	Applied      string  `json:"appliedAt,omitempty"`
	AfterSeconds float64 `json:"afterSeconds,omitempty"`
	// Detail says, of a failed part, what the device rolled back and why:
	// "rolled back model/detector@sha256:1f16… (1.2.0): service/infer did
	// not become healthy: …".
	Detail string `json:"detail,omitempty"`
}

// ReleaseWave counts a release's devices of one rollout wave by state;
// Wave is nil for the devices no hold named a wave for.
type ReleaseWave struct {
	Wave    *int           `json:"wave"`
	Devices int            `json:"devices"`
	Counts  map[string]int `json:"counts"`
}

// ReleaseDetail is GET /v1/releases/{name}: a release, its waves and its
// devices.
type ReleaseDetail struct {
	ReleaseSummary
	Waves       []ReleaseWave   `json:"waves"`
	DeviceParts []ReleaseDevice `json:"devices"`
}
