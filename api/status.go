package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// FormatVersion is the version of the status document: GET /status,
// `tend status --format json`, and what is posted to a collector.
const FormatVersion = "1"

// Resource states in the status document (ResourceStatus.State).
const (
	ResourceOK      = "ok"      // as declared
	ResourceDrifted = "drifted" // changed on the node; reverted at the next apply
	ResourcePending = "pending" // to be created, updated, restarted or deleted
	ResourceFailed  = "failed"  // its action failed in the last tick
)

// Results of a tick in the status document (Status.Result).
const (
	ResultSuccess = "success" // actions were applied
	ResultNoop    = "noop"    // nothing to do
	ResultError   = "error"
)

// ResultSuspended is the status's result of a tick that planned changes
// and applied none because the node is suspended; Status.Pending counts
// them. tend_reconcile_total counts such a tick as noop: nothing was
// applied, and nothing failed.
const ResultSuspended = "suspended"

// ResultHeld is the status's result of a tick whose device's rollout held
// a release (Status.Held says why): the node kept its applied revision and
// reverted drift to it. tend_reconcile_total counts it as success or noop,
// by what the reverts did.
const ResultHeld = "held"

// ResultStaging is the status's result of a tick whose target release
// stages in the background (Status.Staging says how far), not held by
// its rollout: the node kept its applied revision, or, before its first
// release, applied nothing yet. tend_reconcile_total counts it as
// success or noop, by what the tick's drift reverts did.
const ResultStaging = "staging"

// Bounds of the lists of a report (a status document posted to a
// collector): a hub refuses a longer one, and the agent posts the newest
// MaxReportQuarantined entries of Quarantined.
const (
	MaxReportQuarantined = 64
	MaxReportResources   = 1024 // entries of Resources, and of Services
)

// Replica states in the status document.
const (
	ReplicaRunning    = "running"
	ReplicaRestarting = "restarting" // exited; the agent starts it again after its backoff
	ReplicaExited     = "exited"     // exited, and its restart policy leaves it down
	ReplicaNotStarted = "not started"
)

// Status is what the agent last did, for people, scripts and collectors.
type Status struct {
	FormatVersion string `json:"formatVersion"`
	Device        string `json:"device"`
	Version       string `json:"version,omitempty"` // of tend
	// Labels are the device's labels from its AgentConfig, for fleet views
	// that select devices by label.
	Labels          map[string]string `json:"labels,omitempty"`
	AppliedRevision string            `json:"appliedRevision"` // ref@sha1:commit last applied in full
	TargetRevision  string            `json:"targetRevision,omitempty"`
	LastReconcile   string            `json:"lastReconcile"`         // RFC 3339; "" before the first tick
	LastSuccess     string            `json:"lastSuccess,omitempty"` // RFC 3339
	Result          string            `json:"result,omitempty"`      // success | noop | error | suspended | held | staging
	// Pending counts the actions the last tick planned and did not apply
	// because the node is suspended.
	Pending int `json:"pending,omitempty"`
	// LastError is empty when the last tick succeeded; otherwise what failed
	// and where (manifest file and line, resource id, URL without
	// credentials).
	LastError string `json:"lastError"`
	// Warning says what the last tick could not do without failing: a
	// model registry unreachable, the model kept at its applied version;
	// a newer version a policy passed over (rolled back here, or not
	// signed as verify asks); a model or image that runs a version that
	// no longer verifies (a key removed from verify).
	Warning string `json:"warning,omitempty"`
	// DiskFull is set while the disk of stateDir is full: "disk full:
	// PATH: …", the write that failed and what to do.
	DiskFull string `json:"diskFull,omitempty"`
	// Held says why the device's rollout held the target revision:
	// "held: rollout wave 2 opens 2026-12-03T14:00Z".
	Held                string           `json:"held,omitempty"`
	ConsecutiveFailures int              `json:"consecutiveFailures,omitempty"`
	Suspended           bool             `json:"suspended"`
	SuspendReason       string           `json:"suspendReason,omitempty"` // who suspended it, when, and why
	Resources           []ResourceStatus `json:"resources"`
	Services            []ServiceStatus  `json:"services"`
	Drift               []DriftRecord    `json:"drift"`
	// Notify is the subscription of notify.mqtt: connected, or since
	// when and why not; absent without notify.
	Notify *Notify `json:"notify,omitempty"`
	// Quarantined lists the releases rolled back on this node, oldest
	// first: each a failure of that release, for fleet views and rollout
	// brakes.
	Quarantined []Quarantined `json:"quarantined,omitempty"`
	// Staging is the release downloading in the background, or staged
	// and waiting for its rollout; absent when none is.
	Staging *Staging `json:"staging,omitempty"`
	// Wave is the device's wave in the Rollout that governs its target
	// (-1: in no wave), for fleet views and rollout brakes; absent
	// without a rollout.
	Wave *int `json:"wave,omitempty"`
	// Release is the release of the device's target: the one it works
	// towards while one waits (held, staging, pending), else the one it
	// runs. Absent before the first tick that rendered a target, and
	// from a tend that sends no key (v0.1.0): the hub then counts by
	// commit.
	Release *Release `json:"release,omitempty"`
	// AppliedRelease is the key of the release the device runs (see
	// ReleaseKey): the one it last took in full. Absent before the
	// first apply.
	AppliedRelease string `json:"appliedRelease,omitempty"`
	// Rollout is the name of the Rollout that governs the device's
	// target, which a verdict on its releases names; absent without one.
	Rollout string `json:"rollout,omitempty"`
	// ReportSeq orders the device's reports for a collector, which never
	// orders them by the device's clock. Absent from GET /status and
	// tend status: only a posted report carries it.
	ReportSeq *ReportSeq `json:"reportSeq,omitempty"`
}

// ReportSeq is the place of a report among its device's: Epoch is random
// per stateDir (a reflashed device starts a new one) and Seq rises with
// every report posted, kept in the stateDir.
type ReportSeq struct {
	Epoch string `json:"epoch"`
	Seq   uint64 `json:"seq"`
}

// Release is a release as a device reports it: its key (what made it
// new on the device, see ReleaseKey), the fleet revision it is at,
// and every model and container image it runs, as resolved.
type Release struct {
	Key       string            `json:"key"`
	Revision  string            `json:"revision"`
	Resources []ReleaseResource `json:"resources,omitempty"`
}

// ReleaseResource is a model or a container service's image of a
// release: its resource id, its ref as declared, the tag it resolved
// through ("" for a digest ref) and its digest.
type ReleaseResource struct {
	ID     string `json:"id"`
	Ref    string `json:"ref"`
	Tag    string `json:"tag,omitempty"`
	Digest string `json:"digest"`
}

// Staging is a release staged in the background: what it downloads, how
// far it got, and why its last attempt failed.
type Staging struct {
	Revision       string   `json:"revision"`
	Resources      []string `json:"resources"`
	Bytes          int64    `json:"bytes"`
	TotalBytes     int64    `json:"totalBytes"`
	BytesPerSecond int64    `json:"bytesPerSecond"`
	ETA            string   `json:"eta,omitempty"`   // a duration, "11m0s"; "" when not known or done
	StartedAt      string   `json:"startedAt"`       // RFC 3339
	Error          string   `json:"error,omitempty"` // why the last attempt failed; the next tick after its backoff tries again
}

// Quarantined is a release rolled back on this node: not applied again
// until tend retry names it.
type Quarantined struct {
	// Release is what made it new: a commit (ref@sha1:commit), or a
	// digest that moved at the applied commit (model/NAME@sha256:…,
	// service/NAME@sha256:… for an image).
	Release string `json:"release"`
	// Revision is the fleet revision it was rolled back at.
	Revision string `json:"revision"`
	Tag      string `json:"tag,omitempty"` // the tag a digest was resolved through
	Reason   string `json:"reason"`
	At       string `json:"at"` // RFC 3339
}

// Notify is the MQTT subscription in the status document.
type Notify struct {
	Broker    string `json:"broker"` // URL, without credentials
	Topic     string `json:"topic"`
	Connected bool   `json:"connected"`
	// Since is when it connected, or lost (or first failed to make) the
	// connection; RFC 3339.
	Since string `json:"since"`
	// Error is why it is not connected.
	Error string `json:"error,omitempty"`
}

// DriftRecord is one drift event in the status document, and when tend
// reverted it: what package drift's tracker keeps (drift.Record), as it
// is written.
type DriftRecord struct {
	Time     time.Time `json:"time"`
	Resource string    `json:"resource"`
	Kind     string    `json:"kind"`
	Reason   string    `json:"reason"`
	Revision string    `json:"revision"`
	Reverted string    `json:"reverted,omitempty"` // RFC 3339 with nanoseconds; "" until reverted
}

// ResourceStatus is one resource in the status document.
type ResourceStatus struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Message string `json:"message"`
}

// ServiceStatus is one declared service and its instances, as the agent
// watches them.
type ServiceStatus struct {
	ID       string          `json:"id"`
	Replicas []ReplicaStatus `json:"replicas"`
}

// ReplicaStatus is one instance of a service.
type ReplicaStatus struct {
	Replica int `json:"replica"`
	PID     int `json:"pid,omitempty"` // while it runs
	// A container's id while it runs, and its image by digest.
	Container string `json:"container,omitempty"`
	Image     string `json:"image,omitempty"`
	State     string `json:"state"` // running | restarting | exited | not started
	Restarts  int    `json:"restarts"`
	// Health is what its probe last said ("healthy", or "unhealthy: …");
	// empty without a probe.
	Health   string `json:"health,omitempty"`
	LastExit string `json:"lastExit,omitempty"` // how it last ended: "exit code 3", "killed by signal killed (out of memory: limit 64Mi)"
	// LastExitAt is when it last ended (RFC 3339, UTC).
	LastExitAt string `json:"lastExitAt,omitempty"`
	CrashLoop  bool   `json:"crashLoop,omitempty"`
}

// Fingerprint identifies the content of the status that matters to a
// collector: everything but the time of the last reconcile and success,
// which move on every tick, and the reportSeq, which moves on every post.
func (s Status) Fingerprint() string {
	s.LastReconcile, s.LastSuccess, s.ReportSeq = "", "", nil
	if st := s.Staging; st != nil {
		// A download's progress alone is not news.
		c := *st
		c.Bytes, c.BytesPerSecond, c.ETA = 0, 0, ""
		s.Staging = &c
	}
	b, _ := json.Marshal(s)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
