package status

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/drift"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// DriftHistory is how many drift events the status document keeps.
const DriftHistory = 50

// Tracker keeps the status document up to date from the result of every
// tick. It is safe for concurrent use: the loop observes, the server and the
// reporter read.
type Tracker struct {
	mu        sync.Mutex
	status    Status                    // Resources and Drift unused: see resources and drift
	resources map[string]ResourceStatus // by id: every resource a plan has named
	drift     *drift.Tracker
	last      string // fingerprint of the status after the last change
	changed   chan struct{}
	replicas  map[string]int         // declared services: instances by name
	instances Instances              // nil: services are listed without their instances
	staging   func() (Staging, bool) // nil: no release stages
}

// Instances reports the instances of a service, as the supervisor that
// runs them sees them (service.Supervisor.Instances).
type Instances func(name string) ([]service.InstanceState, error)

// NewTracker returns the tracker of a device's agent, before its first tick.
func NewTracker(device, version string) *Tracker {
	t := &Tracker{
		status:    Status{FormatVersion: FormatVersion, Device: device, Version: version},
		resources: map[string]ResourceStatus{},
		drift:     drift.NewTracker(DriftHistory),
		changed:   make(chan struct{}, 1),
		replicas:  map[string]int{},
	}
	t.last = t.snapshot().Fingerprint()
	return t
}

// Changed receives when the status's fingerprint changed: a collector has
// something new to hear. It has room for one, so changes made while nobody
// reads coalesce.
func (t *Tracker) Changed() <-chan struct{} { return t.changed }

// SetLabels sets the device's labels in the status.
func (t *Tracker) SetLabels(labels map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status.Labels = maps.Clone(labels)
}

// SetApplied seeds the applied revision and the key of the applied
// release, read from the inventory when the agent starts, before a tick
// has applied anything.
func (t *Tracker) SetApplied(rev, release string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status.AppliedRevision, t.status.AppliedRelease = rev, release
	t.notify()
}

// SetNotify records the state of the notify subscription.
func (t *Tracker) SetNotify(s Notify) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status.Notify = &s
	t.notify()
}

// Applied returns the revision last applied in full.
func (t *Tracker) Applied() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status.AppliedRevision
}

// SetInstances makes the status list each declared service's instances
// as fn reports them, read when the status is.
func (t *Tracker) SetInstances(fn Instances) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.instances = fn
}

// SetStaging makes the status show the release staging as fn reports
// it, read when the status is (its progress moves between ticks).
func (t *Tracker) SetStaging(fn func() (Staging, bool)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.staging = fn
}

// Status returns a copy of the status document.
func (t *Tracker) Status() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snapshot()
}

// Observe records what one tick saw and did, and returns the drift events
// new in it (see drift.Tracker). Suspended says why the node is suspended,
// "" when it is not: the tick only planned, and its actions stay pending or
// drifted.
func (t *Tracker) Observe(res *Tick, err error, suspended string) []drift.Event {
	if res == nil {
		res = &Tick{}
	}
	end := tickEnd(res)
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &t.status
	s.LastReconcile = RFC3339(end)
	s.Result, s.Pending = res.outcome(err), 0
	if suspended != "" && err == nil && res.Plan != nil && !res.Plan.Empty() {
		s.Result, s.Pending = ResultSuspended, len(res.Plan.Actions)
	}
	s.Suspended, s.SuspendReason = suspended != "", suspended
	if res.Target != "" {
		// A failed fetch holds the node at a snapshot of its last
		// applied commit, which is not the target.
		s.TargetRevision = res.Target
	}
	if res.Plan != nil {
		// A tick that stopped before its plan knows nothing new of the
		// rollout.
		s.Held = ""
	}
	if res.Plan != nil || res.Held != nil {
		s.Wave, s.Rollout = res.Wave, res.Rollout
	}
	if r := res.TargetRelease; r != nil {
		c := *r
		s.Release = &c
	}
	if res.AppliedRelease != "" {
		s.AppliedRelease = res.AppliedRelease
	}
	if h := res.Held; h != nil {
		s.TargetRevision, s.Held = h.Revision, h.Reason
		if err == nil {
			s.Result = ResultHeld
		}
	} else if res.Staging && err == nil {
		s.Result = ResultStaging
	}
	if err != nil {
		s.LastError = err.Error()
		s.ConsecutiveFailures++
	} else {
		s.LastError = ""
		s.ConsecutiveFailures = 0
		s.LastSuccess = RFC3339(end)
	}
	if res.Desired != nil {
		// A tick that stopped before its render knows nothing new of
		// registries.
		s.Warning = ""
		if w := errors.Join(res.offline(), res.quarantined(), res.unverified(), res.activeUnverified()); w != nil {
			s.Warning = w.Error()
		}
	}
	s.DiskFull = res.DiskFull
	if res.Quarantined != nil {
		s.Quarantined = res.Quarantined
	}
	if settled(res, err) && res.Revision != "" && suspended == "" {
		s.AppliedRevision = res.Revision
	}
	t.observeResources(res, err)
	t.observeServices(res)
	var fresh []drift.Event
	if res.Plan != nil {
		// A tick that stopped before its plan knows nothing new of drift.
		applied := appliedIDs(res)
		fresh = t.drift.Observe(res.Drift, func(id string) bool { return applied[id] }, end)
	}
	t.notify()
	return fresh
}

// ObserveHold records what a tick held off by the failure backoff
// reverted (the agent's Reconciler.Hold), and returns the drift events new in it.
// The last tick's result and error stand: the target still fails.
func (t *Tracker) ObserveHold(res *Tick) []drift.Event {
	end := tickEnd(res)
	t.mu.Lock()
	defer t.mu.Unlock()
	applied := appliedIDs(res)
	for _, a := range res.Plan.Actions {
		rs := ResourceStatus{ID: a.Resource, State: StateDrifted, Message: a.Reason}
		switch {
		case applied[a.Resource] && a.IsDrift():
			rs.State, rs.Message = StateOK, a.Reason+" (reverted)"
		case applied[a.Resource]:
			rs.State = StateOK
		}
		if a.IsDrift() || applied[a.Resource] {
			t.resources[a.Resource] = rs
		}
	}
	fresh := t.drift.Observe(res.Drift, func(id string) bool { return applied[id] }, end)
	t.notify()
	return fresh
}

// observeResources sets the state of every resource the plan acts on, and
// marks ok those it no longer acts on. A tick that stopped before its plan
// knows nothing new of them.
func (t *Tracker) observeResources(res *Tick, err error) {
	if res.Plan == nil {
		return
	}
	applied := appliedIDs(res)
	rolledBack := make(map[string]bool, len(res.RolledBack))
	for _, id := range res.RolledBack {
		rolledBack[id] = true
	}
	acted := make(map[string]bool, len(res.Plan.Actions))
	for _, a := range res.Plan.Actions {
		acted[a.Resource] = true
		rs := ResourceStatus{ID: a.Resource, State: StatePending, Message: a.Reason}
		switch {
		case res.Failed != nil && res.Failed.Resource == a.Resource:
			rs.State = StateFailed
			if err != nil {
				rs.Message = err.Error()
			}
		case rolledBack[a.Resource] && res.Failed != nil:
			rs.Message = fmt.Sprintf("rolled back: %s failed (%s)", res.Failed.Resource, a.Reason)
		case applied[a.Resource] && a.Type == planner.Delete:
			delete(t.resources, a.Resource) // no longer tend's
			continue
		case applied[a.Resource] && a.IsDrift():
			rs.State, rs.Message = StateOK, a.Reason+" (reverted)"
		case applied[a.Resource]:
			rs.State = StateOK
			if info, ok := res.Info[a.Resource]; ok {
				rs.Message = info // what it is now, not what the plan was to do (… to download)
			}
		case a.Error != "":
			rs.State, rs.Message = StateFailed, a.Reason+" (will fail: "+a.Error+")"
		case a.Held != "":
			rs.Message = a.Reason + " (held: " + a.Held + ")"
		case a.IsDrift():
			rs.State = StateDrifted
		}
		t.resources[a.Resource] = rs
	}
	for id, rs := range t.resources {
		if !acted[id] && rs.State != StateOK {
			t.resources[id] = ResourceStatus{ID: id, State: StateOK}
		}
	}
	if res.Declared == nil {
		return
	}
	// Every declared resource is listed, those with nothing to do as ok
	// (or failed, when its observer says so: a crash loop); one no longer
	// declared and not deleted is no longer listed.
	declared := make(map[string]bool, len(res.Declared))
	for _, id := range res.Declared {
		declared[id] = true
		if acted[id] {
			continue
		}
		rs := ResourceStatus{ID: id, State: StateOK, Message: res.Info[id]}
		if note := res.Notes[id]; note != "" {
			rs.State, rs.Message = StateFailed, note
		}
		t.resources[id] = rs
	}
	for id := range t.resources {
		if !declared[id] && !acted[id] {
			delete(t.resources, id)
		}
	}
}

// observeServices keeps the declared services and their replica counts
// from a tick that rendered and planned.
func (t *Tracker) observeServices(res *Tick) {
	if res.Declared == nil || res.Desired == nil {
		return
	}
	clear(t.replicas)
	for _, id := range res.Declared {
		if spec, ok := res.Desired.Specs[id].(render.Service); ok {
			t.replicas[spec.Name] = len(spec.Replicas)
		}
	}
}

// services lists the declared services with their instances; the caller
// holds mu.
func (t *Tracker) services() []ServiceStatus {
	out := make([]ServiceStatus, 0, len(t.replicas))
	for _, name := range slices.Sorted(maps.Keys(t.replicas)) {
		var states []service.InstanceState
		if t.instances != nil {
			states, _ = t.instances(name) // a record that cannot be read shows as not started
		}
		out = append(out, ServiceStatus{ID: planner.ServiceID(name), Replicas: replicaStatus(t.replicas[name], states)})
	}
	return out
}

// replicaStatus lists replicas 0 to declared-1, and any other instance
// still recorded (one a scale-down has yet to stop).
func replicaStatus(declared int, states []service.InstanceState) []ReplicaStatus {
	byReplica := make(map[int]service.InstanceState, len(states))
	n := declared
	for _, st := range states {
		byReplica[st.Replica] = st
		n = max(n, st.Replica+1)
	}
	out := make([]ReplicaStatus, 0, n)
	for i := range n {
		st, ok := byReplica[i]
		if !ok && i >= declared {
			continue
		}
		rs := ReplicaStatus{Replica: i, State: ReplicaNotStarted}
		if ok {
			rs = ReplicaStatus{Replica: i, PID: st.PID, Container: st.Container, Image: st.Image, State: ReplicaExited, Restarts: st.Restarts,
				Health: st.Health, LastExit: st.LastExit, LastExitAt: RFC3339(st.LastExitAt), CrashLoop: st.CrashLoop}
			switch {
			case st.Alive:
				rs.State = ReplicaRunning
			case st.Pending:
				rs.State = ReplicaRestarting
			}
		}
		out = append(out, rs)
	}
	return out
}

// notify signals a change of fingerprint; the caller holds mu.
func (t *Tracker) notify() {
	fp := t.snapshot().Fingerprint()
	if fp == t.last {
		return
	}
	t.last = fp
	select {
	case t.changed <- struct{}{}:
	default: // one is already waiting
	}
}

// snapshot copies the status; the caller holds mu.
func (t *Tracker) snapshot() Status {
	s := t.status
	s.Resources = make([]ResourceStatus, 0, len(t.resources))
	for _, r := range t.resources {
		s.Resources = append(s.Resources, r)
	}
	slices.SortFunc(s.Resources, func(a, b ResourceStatus) int { return strings.Compare(a.ID, b.ID) })
	s.Drift = driftRecords(t.drift.Recent())
	s.Services = t.services()
	if t.staging != nil {
		if st, ok := t.staging(); ok {
			s.Staging = &st
		}
	}
	return s
}

// maxDriftLines is how many drift events the text status prints.
const maxDriftLines = 10
