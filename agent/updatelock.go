package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/flock"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/rollout"
	"github.com/tend-dev/tend/source"
)

// holdForLocks, the step after decide, holds a release that decide let
// through when it would stop or restart a service whose update lock
// (the service's updateLock) a process holds: the tick then goes on as a
// tick that decide held, at the applied revision, reverting drift only
// (drift reverts never wait for a lock), and status and
// tend_release_held{reason="lock"} say which lock and which process. The
// first tick after the lock is let go takes the release.
//
// A release stops or restarts a service when its plan against what the
// inventory says was applied (the release without drift, as decide
// computes it) updates the service (a scale-up excepted: it stops
// nothing), restarts it or deletes it. The lock probed is the one the
// applied declaration names, read from the applied commit; only when
// that one names none is the new declaration's probed. The instances a
// release would stop run the applied declaration, and it is their lock
// that guards their work: a commit that moves or removes updateLock
// still waits for the old path, and one that adds it waits for a service
// that may already take that lock.
//
// The wait is bounded by the agent config's maxLockWait, counted from the
// first tick that the lock held the release (kept in stateDir next to
// when the release was first seen, so a restart of the agent does not
// restart it), not from the first sight: a release held by a wave or a
// window for longer than maxLockWait still waits for the lock once it is
// let through. Past it, the release is taken with the lock held, and a
// warning says so.
//
// Only releases wait. The supervisor's restarts (an instance that exited,
// or that its health probe stopped) never ask for the lock: the process
// that held it is gone, or is stopped for being unhealthy, and that is
// the supervisor's, not decide's. A restart that follows a drift revert
// (a file the service references edited by hand) does not wait either.
func (r *Reconciler) holdForLocks(ctx context.Context, t *tick) error {
	comp, snap := t.res.Composed, t.res.Snapshot
	if t.hold || comp == nil || snap == nil || t.res.Desired == nil {
		return nil
	}
	inv, err := t.node.applier.Inventory()
	if err != nil {
		return err
	}
	if _, err := source.ParseRevision(inv.Revision); err != nil {
		return nil // nothing applied yet: nothing runs to be stopped
	}
	release, err := t.release(inv)
	if err != nil || release.Empty() {
		return err
	}
	stopped := stoppedServices(release.Actions)
	if len(stopped) == 0 {
		return nil
	}
	locks := r.updateLocks(ctx, t, inv, stopped)
	var held []string
	for _, lock := range locks {
		h, err := probeUpdateLock(filepath.Join(r.Config.Root, lock))
		if err != nil {
			r.logger().WarnContext(ctx, "update lock cannot be probed; taken as not held", keyDevice, r.Config.Device,
				keyReason, err.Error())
			continue
		}
		if h.Held {
			held = append(held, "update lock "+lock+" held by "+holder(h))
		}
	}
	if len(held) == 0 {
		return nil
	}
	now := r.now()
	key := clockKey(t.res.Desired.Desired)
	record := t.upTo == StepApply
	seen, err := r.firstSeen(key, now, record)
	if err != nil {
		return err
	}
	since, err := r.lockHeldSince(key, now, record)
	if err != nil {
		return err
	}
	wait := r.Config.MaxLockWait.D()
	if wait == 0 {
		wait = manifest.DefaultMaxLockWait
	}
	reason := "held: " + strings.Join(held, "; ")
	if until := since.Add(wait); !now.Before(until) {
		r.logger().WarnContext(ctx, "update lock held for longer than maxLockWait; taking the release anyway", keyDevice, r.Config.Device,
			keyRevision, snap.Revision.String(), keyResources, strings.Join(released(release.Actions), ","), keyReason, reason,
			"since", since.UTC().Format(time.RFC3339), "maxLockWait", manifest.FormatDuration(wait))
		return nil
	}
	wave := rollout.NoWave
	if comp.Rollout != nil {
		wave, _ = rollout.Wave(r.Config.Device, comp.Device.Metadata.Labels, comp.Rollout)
	}
	t.res.Held = &HeldRelease{Revision: snap.Revision.String(), Resources: released(release.Actions),
		Cause: rollout.CauseLock, Reason: reason, Wave: wave, FirstSeen: seen}
	r.logger().InfoContext(ctx, "release held by an update lock; the node keeps its applied revision and reverts drift to it",
		keyDevice, r.Config.Device, keyRevision, snap.Revision.String(), keyResources, strings.Join(t.res.Held.Resources, ","), keyReason, reason,
		"until", since.Add(wait).UTC().Format(time.RFC3339))
	return r.holdApplied(ctx, t)
}

// stoppedServices names, in plan order, the services whose running
// instances a release's actions stop: an update (but a scale-up, which
// only starts instances), a restart, a delete.
func stoppedServices(actions []planner.Action) []string {
	var names []string
	for _, a := range actions {
		if a.Kind != planner.KindService || a.OnlyDrift() || a.Type == planner.Create || scaleUp(a) {
			continue
		}
		if name := planner.ServiceName(a.Resource); !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// scaleUp reports whether a is an update of a service that only adds
// replicas.
func scaleUp(a planner.Action) bool {
	if a.Type != planner.Update || a.Restart || len(a.Changes) != 1 || a.Changes[0].Field != planner.FieldReplicas {
		return false
	}
	from, err1 := strconv.Atoi(a.Changes[0].From)
	to, err2 := strconv.Atoi(a.Changes[0].To)
	return err1 == nil && err2 == nil && to > from
}

// updateLocks returns the update locks (as declared, before root) of the
// services named, each once: the applied declaration's, or the new one's
// when the applied declares none (see holdForLocks). The applied
// declarations are read from the applied commit in stateDir, with no
// remote; when they cannot be, the new ones alone are used, and a
// warning says why.
func (r *Reconciler) updateLocks(ctx context.Context, t *tick, inv *applier.Inventory, services []string) []string {
	declared := func(d *manifest.Device) map[string]string {
		out := map[string]string{}
		for _, s := range d.Spec.Services {
			if s.UpdateLock != "" {
				out[s.Name] = s.UpdateLock
			}
		}
		return out
	}
	target := declared(t.res.Composed.Device)
	applied, err := r.appliedDeclarations(ctx, t, inv)
	if err != nil {
		r.logger().WarnContext(ctx, "the applied commit's update locks cannot be read; only the new declarations' are probed",
			keyDevice, r.Config.Device, keyRevision, inv.Revision, keyReason, err.Error())
	}
	var locks []string
	for _, name := range services {
		lock := target[name]
		if applied != nil {
			if l, ok := declared(applied)[name]; ok {
				lock = l
			}
		}
		if lock != "" && !slices.Contains(locks, lock) {
			locks = append(locks, lock)
		}
	}
	return locks
}

// appliedDeclarations composes the device at the applied commit, read as
// a hold reads it (fetchApplied), without touching t.
func (r *Reconciler) appliedDeclarations(ctx context.Context, t *tick, inv *applier.Inventory) (*manifest.Device, error) {
	if inv.Revision == t.res.Snapshot.Revision.String() {
		return t.res.Composed.Device, nil // a digest moved at the applied commit
	}
	scratch := &tick{node: t.node, upTo: t.upTo}
	if err := r.fetchApplied(ctx, scratch); err != nil {
		return nil, err
	}
	if scratch.res.Snapshot == nil {
		return nil, fmt.Errorf("no applied revision")
	}
	comp, err := LoadDevice(r.Config, scratch.res.Snapshot, true)
	if err != nil {
		return nil, err
	}
	return comp.Device, nil
}

// lockKey is the key in releases.json of when an update lock first held
// the release named key: next to the release's first sight, never equal
// to a release's key (a tend that knows only first sights never reads
// it).
func lockKey(key string) string { return "lock:" + key }

// lockHeldSince returns when an update lock first held the release named
// key (see clockKey), now if never; with record, it keeps that in
// stateDir, next to the release's first sight and forgetting everything
// else. A time in the future (a clock set back) counts from now.
func (r *Reconciler) lockHeldSince(key string, now time.Time, record bool) (time.Time, error) {
	var seen releases
	if _, err := statedir.ReadJSON(statedir.Dir(r.Config.StateDir).Releases(), &seen); err != nil {
		if _, newer := errors.AsType[*statedir.NewerError](err); newer {
			return now, err // a newer tend's record is not written over
		}
		r.logger().Warn("forgetting since when update locks hold the release", keyReason, err.Error())
		seen = nil
	}
	if at, ok := seen[lockKey(key)]; ok && !at.After(now) {
		return at, nil
	}
	if record {
		keep := releases{lockKey(key): now.UTC()}
		if at, ok := seen[key]; ok {
			keep[key] = at
		}
		if err := statedir.WriteJSON(r.Config.StateDir, statedir.ReleasesFile, keep, 0o600); err != nil {
			return now, fmt.Errorf("record since when an update lock holds release %s: %w", key, err)
		}
	}
	return now, nil
}

// probeUpdateLock probes the update lock at path (see flock.Probe).
func probeUpdateLock(path string) (flock.Holder, error) {
	h, err := flock.Probe(path)
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return h, fmt.Errorf("%s update lock %s: %w", pe.Op, pe.Path, pe.Err)
	}
	return h, err
}

// holder names the process that holds a lock, as a held release says.
func holder(h flock.Holder) string {
	if h.PID > 0 {
		return "pid " + strconv.Itoa(h.PID)
	}
	return "another process"
}
