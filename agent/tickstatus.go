package agent

import "github.com/tend-dev/tend/agent/status"

// statusTick is what the status and the metrics read of a tick's result.
func statusTick(res *Result) *status.Tick {
	if res == nil {
		res = &Result{}
	}
	t := &status.Tick{
		Started: res.Started, Duration: res.Duration,
		Desired: res.Desired, Plan: res.Plan, Drift: res.Drift,
		Applied: res.Applied, Failed: res.Failed, RolledBack: res.RolledBack,
		Downloaded: res.Downloaded, Declared: res.Declared, Notes: res.Notes, Info: res.Info,
	}
	if snap := res.Snapshot; snap != nil {
		t.Revision = snap.Revision.String()
		if res.FailedStep != StepFetch {
			t.Target = t.Revision
		}
		if res.Staging != nil && res.Plan == nil {
			// A first release that stages: the tick ended before its
			// plan, and applied nothing.
			t.Revision = ""
		}
	}
	switch {
	case fetchFailed(res):
		t.Fetch = status.FetchError
	case res.Snapshot != nil && res.Snapshot.Fetched:
		t.Fetch = status.FetchChanged
	case res.Snapshot != nil:
		t.Fetch = status.FetchUnchanged
	}
	if res.Quarantine != nil {
		t.Quarantined = make([]status.Quarantined, 0, len(res.Quarantine))
		for _, q := range res.Quarantine {
			rev := q.Applied
			if rev == "" {
				rev = q.Revision
			}
			t.Quarantined = append(t.Quarantined, status.Quarantined{Release: q.Revision, Revision: rev, Tag: q.Tag, Reason: q.Reason, At: status.RFC3339(q.At)})
		}
	}
	if r := res.Release; r != nil {
		c := *r
		t.Release = &c
	}
	if r := res.TargetRelease; r != nil {
		c := *r
		t.TargetRelease = &c
	}
	t.AppliedRelease = res.AppliedRelease.String()
	t.Staging = res.staging()
	if res.Wave != nil {
		w := *res.Wave
		t.Wave = &w
		t.Rollout = res.Rollout
	}
	if h := res.Held; h != nil {
		t.Held = &status.Held{Revision: h.Revision, Cause: h.Cause, Reason: h.Reason}
	}
	return t
}
