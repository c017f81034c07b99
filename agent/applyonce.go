package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/source"
)

// RunningAgent is an agent that runs on the stateDir of a one-shot apply,
// and what it follows.
type RunningAgent struct {
	PID int // 0 when it has not written its pid
	// Follows is the revision its last status names as its target (or,
	// without one, as applied), REF@sha1:COMMIT; "" when it wrote none.
	Follows string
}

// Reverts says, for an apply of rev, that the agent's next tick reverts
// it: the agent follows another ref, or which ref is unknown. It is ""
// when the agent follows rev's ref.
func (a *RunningAgent) Reverts(rev source.Revision) string {
	who := "a tend agent"
	if a.PID > 0 {
		who = fmt.Sprintf("a tend agent (pid %d)", a.PID)
	}
	followed, err := source.ParseRevision(a.Follows)
	if err != nil {
		return fmt.Sprintf("%s runs on this stateDir and has written no status yet: its next tick applies what it follows, "+
			"which reverts this apply of %s unless it follows %s too", who, rev.String(), rev.DisplayRef())
	}
	if followed.SameRef(rev) {
		return ""
	}
	return fmt.Sprintf("%s runs on this stateDir and follows %s (last at %s): its next tick reverts this apply of %s; "+
		"stop the agent to keep it, or change the agent's source.ref", who, followed.DisplayRef(), followed.String(), rev.String())
}

// ApplyOnce is a one-shot apply (`tend apply`): Apply, and then, when no
// agent runs on stateDir, the status document of this apply written to
// stateDir as an agent writes its own after a tick, so that `tend status`
// answers on a node reconciled from a timer. The status carries over,
// from the one it replaces, the drift history (what was still open
// closes with an apply that succeeds) and, after a failure, the last
// success and the count of failures in a row. When an agent runs,
// its status is its own and stays, and Result.Agent says what it follows.
// Both happen while the stateDir lock is held: no tick of an agent comes
// in between. version is tend's, as the status shows it. A Reconciler
// without a Supervisor is given one that watches nothing: services start
// detached, as a one-shot apply starts them.
func (r *Reconciler) ApplyOnce(ctx context.Context, version string) (*Result, error) {
	start := r.now()
	if err := r.checkState(); err != nil {
		return &Result{}, err
	}
	unlock, err := r.lock(ctx)
	if err != nil {
		return &Result{}, err
	}
	defer unlock()
	if err := r.migrateState(r.logger()); err != nil {
		return &Result{}, err
	}
	if r.Supervisor == nil {
		// The status lists the services' instances through it.
		r.Supervisor = NewSupervisor(r.Config, r.logger())
	}
	res, err := r.runLocked(ctx, StepApply, start)
	if err == nil {
		r.dropFormatCopies()
	}
	log := r.logger()
	pid, running, aerr := applier.AgentRunning(r.Config.StateDir)
	switch {
	case aerr != nil:
		log.Warn("status not written to stateDir", keyDevice, r.Config.Device, keyError, aerr.Error())
	case running:
		res.Agent = &RunningAgent{PID: pid, Follows: lastFollowed(r.Config.StateDir)}
	default:
		if werr := r.writeOnceStatus(res, err, version); werr != nil {
			log.Warn("status not written to stateDir; tend status will not show this apply", keyDevice, r.Config.Device, keyError, werr.Error())
		}
	}
	return res, err
}

// writeOnceStatus writes the status document of a one-shot apply.
func (r *Reconciler) writeOnceStatus(res *Result, err error, version string) error {
	c := r.Config
	t := status.NewTracker(c.Device, version)
	t.SetInstances(r.Supervisor.Instances)
	if inv, ierr := r.inventory(); ierr == nil && inv.Revision != "" {
		t.SetApplied(inv.Revision, inv.AppliedRelease().String())
	}
	t.Observe(statusTick(res), err, "")
	s := t.Status()
	s.Suspended, s.SuspendReason = Suspended(c) // applied with --force
	if prev, ok := previousStatus(c.StateDir); ok && prev.Device == c.Device {
		if err != nil {
			s.LastSuccess, s.ConsecutiveFailures = prev.LastSuccess, prev.ConsecutiveFailures+1
		}
		end := res.Started.Add(res.Duration).UTC().Format(time.RFC3339Nano)
		for i, d := range prev.Drift {
			if d.Reverted == "" && err == nil {
				prev.Drift[i].Reverted = end // the node is as declared: that drift is gone
			}
		}
		s.Drift = append(prev.Drift, s.Drift...)
		if n := len(s.Drift) - status.DriftHistory; n > 0 {
			s.Drift = s.Drift[n:]
		}
	}
	return status.WriteLast(c.StateDir, s)
}

// inventory returns the inventory in stateDir: the copy the tick's
// applier holds (what the apply read, and saved or left unchanged), or,
// when no node was opened or the applier dropped its copy, as read now.
// The caller holds the stateDir lock.
func (r *Reconciler) inventory() (*applier.Inventory, error) {
	r.nodes.mu.Lock()
	n := r.nodes.node
	r.nodes.mu.Unlock()
	if n == nil {
		return applier.LoadInventory(r.Config.StateDir)
	}
	return n.applier.Inventory()
}

// previousStatus reads the status document last written in stateDir.
func previousStatus(stateDir string) (status.Status, bool) {
	var s status.Status
	b, _, err := status.ReadLast(stateDir)
	if err != nil || json.Unmarshal(b, &s) != nil || s.FormatVersion != status.FormatVersion {
		return s, false // a document of another version is not carried over into this one's
	}
	return s, true
}

// lastFollowed is the revision the status last written in stateDir
// names as its target, else as applied; "" when there is none.
func lastFollowed(stateDir string) string {
	s, ok := previousStatus(stateDir)
	switch {
	case !ok:
		return ""
	case s.TargetRevision != "":
		return s.TargetRevision
	}
	return s.AppliedRevision
}
