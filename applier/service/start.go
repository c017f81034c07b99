package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// errExited: the instance's process exited during its startup.
var errExited = errors.New("exited")

// startHealthy starts in and waits until it is healthy: running startSettle
// after its start, and then passing its probe if it has one. A start that
// exits (a crash, a kill in its first moments) is retried under the
// restart policy, after the supervisor's restart backoff, until the startup
// grace (the probe's, DefaultStartupGrace without one) measured from the
// first start has passed; only then is the update a failure (and rolled
// back). While an agent watches, its supervisor may have restarted the
// instance first: that instance is the one waited for.
func (d *Driver) startHealthy(ctx context.Context, in Instance, spec RunSpec) error {
	grace := startupGrace
	if spec.Probe != nil {
		grace = spec.Probe.grace()
	}
	start := time.Now()
	proc, err := d.sup.Run(ctx, in, spec)
	for attempt := 1; ; attempt++ {
		if err != nil {
			return err
		}
		failpoint.Hit("service:health")
		err = d.judge(ctx, spec, proc, start) // the grace runs from the first start
		if err == nil || !errors.Is(err, errExited) || !restarts(spec.Policy) {
			return err
		}
		wait := restartBackoff.Delay(attempt)
		if time.Since(start)+wait >= grace {
			return fmt.Errorf("%w (started %d times within startupGrace %s)", err, attempt, roundDuration(grace))
		}
		d.sup.log.WarnContext(ctx, "service exited during startup; starting it again", logKeyResource, planner.ServiceID(in.Service),
			logKeyReplica, in.Replica, "in", roundDuration(wait), logKeyError, err.Error())
		if err := backoff.Sleep(ctx, wait); err != nil {
			return err
		}
		if cur, ok := d.sup.running(in.Service, in.Replica); ok && !sameHandle(cur, proc) {
			proc, err = cur, nil // the watcher restarted it
			continue
		}
		proc, err = d.sup.Run(ctx, in, spec)
	}
}

// judge waits until proc, started (first) at start from spec, is
// healthy: running startSettle, then passing its probe if it has one
// within its startup grace from start.
func (d *Driver) judge(ctx context.Context, spec RunSpec, proc Handle, start time.Time) error {
	if err := d.settle(ctx, spec.Policy, proc); err != nil || spec.Probe == nil {
		return err
	}
	p := *spec.Probe
	p.started = start
	return p.WaitHealthy(ctx, proc.Alive)
}

// Verify judges again the instances of service id that an interrupted
// apply started from the spec whose hash is hash (see applier.Verifier),
// as Apply judges a start, with a full startup grace from now: one that
// runs must keep running and pass its probe; one that does not (the node
// rebooted, or it exited) is started again from its record and waited
// for, retried under its restart policy. One that finished as its policy
// lets it is not started again. Instances of another spec were not
// reached: the next plan updates them, and judges them then.
func (d *Driver) Verify(ctx context.Context, id, hash string) error {
	name := planner.ServiceName(id)
	recs, err := d.sup.serviceRecords(name)
	if err != nil {
		return err
	}
	states, err := d.sup.Instances(name)
	if err != nil {
		return err
	}
	done := map[int]bool{}
	for _, st := range states {
		done[st.Replica] = st.Done
	}
	for _, r := range recs {
		if r.SpecHash != hash || done[r.Instance.Replica] {
			continue
		}
		spec := RunSpec{Hash: r.SpecHash, Policy: r.Policy, Grace: DefaultStopTimeout, Probe: r.Probe, Inputs: r.Inputs}
		var err error
		running := r.Starting == nil && d.sup.alive(r)
		if running {
			err = d.judge(ctx, spec, r.Proc, time.Now())
		}
		if !running || errors.Is(err, errExited) && restarts(spec.Policy) {
			err = d.startHealthy(ctx, r.Instance, spec)
		}
		if err != nil {
			return fmt.Errorf("replica %d: %w", r.Instance.Replica, err)
		}
	}
	return nil
}

// restarts reports whether policy restarts an instance whatever its exit.
func restarts(policy string) bool {
	return policy == manifest.RestartAlways || policy == ""
}

// settle checks that an instance is still running after startSettle (a
// health probe then checks the rest): one that exits fails its start
// (errExited). A service whose restart policy lets it finish (never,
// on-failure) may exit.
func (d *Driver) settle(ctx context.Context, policy string, p Handle) error {
	if !restarts(policy) {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(startSettle):
	}
	if !p.Alive() {
		return fmt.Errorf("%w: pid %d %w within %s of its start; see tend logs", ErrUnhealthy, p.PID(), errExited, roundDuration(startSettle))
	}
	return nil
}
