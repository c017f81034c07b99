package status

import (
	"time"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/drift"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Results of a tick, as logs, metrics and the status document name them.
const (
	ResultSuccess = api.ResultSuccess
	ResultNoop    = api.ResultNoop
	ResultError   = api.ResultError
)

// Results of a source fetch, as tend_source_fetch_total names them.
const (
	FetchChanged   = "changed"
	FetchUnchanged = "unchanged"
	FetchError     = "error"
)

// Tick is what one tick saw and did, as the status document and the
// metrics read it: the agent makes one from the result of each tick.
type Tick struct {
	// Started is when the tick began; Duration how long it took.
	Started  time.Time
	Duration time.Duration
	// Revision is the revision the tick worked on (ref@sha1:commit),
	// applied once the tick settles; "" when it got none.
	Revision string
	// Target is the target revision it fetched; "" when it fetched none,
	// or its fetch step failed and the node was held at its last applied
	// commit.
	Target string
	// Fetch says how the fetch of the fleet repo went (FetchChanged,
	// FetchUnchanged, FetchError); "" when the tick did not get to it.
	Fetch string
	// Desired is the device's rendered desired state, once rendered.
	Desired *render.Desired
	Plan    *planner.Changeset
	Drift   []drift.Event
	Applied []planner.Action
	// Failed is the action that failed, if one did.
	Failed *planner.Action
	// RolledBack lists the resources put back when the plan was rolled
	// back.
	RolledBack []string
	// Downloaded is the bytes pulled from registries.
	Downloaded int64
	// Declared lists the ids of the desired resources, once rendered.
	Declared []string
	// Notes holds what observers said of resources the plan leaves alone;
	// Info describes declared resources (a model's ref and digest).
	Notes map[string]string
	Info  map[string]string
	// Held says why the target was not taken, or is nil.
	Held *Held
	// DiskFull says which write found the disk full and what the agent
	// did about it, while its disk reserve is let go; "" otherwise.
	DiskFull string
	// Quarantined lists the releases rolled back on this node, oldest
	// first; nil when the tick did not read them.
	Quarantined []Quarantined
	// Release is what the tick decided of its target as a release
	// (tend_release_convergence_seconds, tend_release_lag_seconds); nil
	// when it did not get to decide, or did not record first sights (a
	// plan, a tick of a suspended node).
	Release *SeenRelease
	// Wave is the device's wave in the Rollout of the target (-1: in no
	// wave); nil without a rollout, or when the tick did not decide.
	Wave *int
	// Rollout is the name of that Rollout ("" with Wave nil).
	Rollout string
	// TargetRelease is the release of the tick's target (Status.Release);
	// nil when the tick did not decide. AppliedRelease is the key of the
	// release the node runs once the tick applied; "" when it did not.
	TargetRelease  *Release
	AppliedRelease string
	// Staging says the tick's target release stages in the background
	// and the tick did not take it.
	Staging bool
}

// SeenRelease is the release a tick's target makes against what the node
// applied.
type SeenRelease struct {
	// FirstSeen is when this device first saw the release; zero when the
	// target is what the node applied: no release waits.
	FirstSeen time.Time
	// Activated says the tick applied the release in full.
	Activated bool
}

// Held is a release a tick held: the device's rollout, its gate, or a
// service's update lock made it wait.
type Held struct {
	Revision string // the release held, ref@sha1:commit
	Cause    string // one of rollout.Causes
	Reason   string // held: rollout wave 2 opens 2026-12-03T14:00Z
}

// Outcome names a tick that applied applied actions and ended with err,
// for logs and metrics.
func Outcome(err error, applied int) string {
	switch {
	case err != nil:
		return ResultError
	case applied > 0:
		return ResultSuccess
	default:
		return ResultNoop
	}
}

// outcome names the tick for the status and the metrics.
func (res *Tick) outcome(err error) string { return Outcome(err, len(res.Applied)) }

// offline says why models were kept at their applied version, or is nil.
func (res *Tick) offline() error {
	if res.Desired == nil {
		return nil
	}
	return res.Desired.Offline
}

// quarantined says why models were kept off their newest version, which
// was rolled back on this node, or is nil.
func (res *Tick) quarantined() error {
	if res.Desired == nil {
		return nil
	}
	return res.Desired.Quarantined
}

// unverified says which versions policies passed over for want of a
// signature, or is nil.
func (res *Tick) unverified() error {
	if res.Desired == nil {
		return nil
	}
	return res.Desired.Unverified
}

// activeUnverified says which models and images run a version that no
// longer verifies, or is nil.
func (res *Tick) activeUnverified() error {
	if res.Desired == nil {
		return nil
	}
	return res.Desired.ActiveUnverified
}

// tickEnd is when a tick ended; now for a result that does not say (the
// lock could not be taken).
func tickEnd(res *Tick) time.Time {
	if res.Started.IsZero() {
		return time.Now()
	}
	return res.Started.Add(res.Duration)
}

// settled reports whether a tick ended with nothing left to do: no error,
// and every action of its plan applied.
func settled(res *Tick, err error) bool {
	return err == nil && (res.Plan == nil || len(res.Applied) >= len(res.Plan.Actions))
}

// appliedIDs returns the resources whose action succeeded and stayed: not
// undone by a rollback.
func appliedIDs(res *Tick) map[string]bool {
	ids := make(map[string]bool, len(res.Applied))
	for _, a := range res.Applied {
		ids[a.Resource] = true
	}
	for _, id := range res.RolledBack {
		delete(ids, id)
	}
	return ids
}
