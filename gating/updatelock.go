package gating

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

	"github.com/tend-dev/tend/config"
	"github.com/tend-dev/tend/internal/flock"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/rollout"
	"github.com/tend-dev/tend/source"
)

// holdForLocks, once the rollout let a release through (or took it at
// once, without one), holds it when it would stop or restart a service
// whose update lock (the service's updateLock) a process holds: the tick
// then goes on as one the rollout held, at the applied revision,
// reverting drift only (drift reverts never wait for a lock), and status
// and tend_release_held{reason="lock"} say which lock and which process.
// The first tick after the lock is let go takes the release.
//
// A release stops or restarts a service when its plan against what the
// inventory says was applied (the release without drift, as the rollout
// sees it) updates the service (a scale-up excepted: it stops
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
// the supervisor's, not the gating's. A restart that follows a drift revert
// (a file the service references edited by hand) does not wait either.
func (g *Decider) holdForLocks(ctx context.Context, t *tick, d *Decision) error {
	comp, snap, inv := t.Composed, t.Snapshot, t.Inventory
	if _, err := source.ParseRevision(inv.Revision); err != nil {
		return nil // nothing applied yet: nothing runs to be stopped
	}
	release, err := t.release()
	if err != nil || release.Empty() {
		return err
	}
	stopped := stoppedServices(release.Actions)
	if len(stopped) == 0 {
		return nil
	}
	locks := t.updateLocks(ctx, stopped)
	var held []string
	for _, lock := range locks {
		h, err := probeUpdateLock(filepath.Join(t.Config.Root, lock))
		if err != nil {
			t.logger().WarnContext(ctx, "update lock cannot be probed; taken as not held", keyDevice, t.Config.Device,
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
	now := t.now()
	key := clockKey(t.Desired.Desired)
	seen, err := t.firstSeen(key, now, t.Record)
	if err != nil {
		return err
	}
	since, err := t.lockHeldSince(key, now, t.Record)
	if err != nil {
		return err
	}
	wait := t.Config.MaxLockWait.D()
	if wait == 0 {
		wait = manifest.DefaultMaxLockWait
	}
	reason := "held: " + strings.Join(held, "; ")
	if until := since.Add(wait); !now.Before(until) {
		t.logger().WarnContext(ctx, "update lock held for longer than maxLockWait; taking the release anyway", keyDevice, t.Config.Device,
			keyRevision, snap.Revision.String(), keyResources, strings.Join(released(release.Actions), ","), keyReason, reason,
			"since", since.UTC().Format(time.RFC3339), "maxLockWait", manifest.FormatDuration(wait))
		return nil
	}
	wave := rollout.NoWave
	if comp.Rollout != nil {
		wave, _ = rollout.Wave(t.Config.Device, comp.Device.Metadata.Labels, comp.Rollout)
	}
	d.Verdict, d.Resources, d.Until = Hold, released(release.Actions), since.Add(wait)
	d.Held = &Held{Revision: snap.Revision.String(), Resources: d.Resources,
		Cause: rollout.CauseLock, Reason: reason, Wave: wave, FirstSeen: seen}
	return nil
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
func (t *tick) updateLocks(ctx context.Context, services []string) []string {
	declared := func(d *manifest.Device) map[string]string {
		out := map[string]string{}
		for _, s := range d.Spec.Services {
			if s.UpdateLock != "" {
				out[s.Name] = s.UpdateLock
			}
		}
		return out
	}
	target := declared(t.Composed.Device)
	applied, err := t.appliedDeclarations(ctx)
	if err != nil {
		t.logger().WarnContext(ctx, "the applied commit's update locks cannot be read; only the new declarations' are probed",
			keyDevice, t.Config.Device, keyRevision, t.Inventory.Revision, keyReason, err.Error())
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
// a hold reads it: from the node's copy of the source, with no remote,
// and composed and validated as the agent composes a target (manifest
// files of the device's source paths, under allowPaths).
func (t *tick) appliedDeclarations(ctx context.Context) (*manifest.Device, error) {
	inv := t.Inventory
	if inv.Revision == t.Snapshot.Revision.String() {
		return t.Composed.Device, nil // a digest moved at the applied commit
	}
	rev, err := source.ParseRevision(inv.Revision)
	if err != nil {
		return nil, errors.New("no applied revision")
	}
	c := t.Config
	_, paths, err := c.ExpandSource()
	if err != nil {
		return nil, err
	}
	// Named as it was applied: snap.Revision.String() is inv.Revision.
	snap, err := t.Applied.Applied(ctx, rev, config.SourcePaths(paths))
	if err != nil {
		return nil, err
	}
	if snap.Stale != nil {
		return nil, snap.Stale
	}
	inputs := make([]manifest.Input, len(snap.Files))
	for i, f := range snap.Files {
		inputs[i] = manifest.Input{Name: f.Path, Data: f.Data, PerDevice: f.PerDevice}
	}
	comp, err := manifest.Compose(inputs, manifest.ComposeOptions{Device: c.Device, Labels: c.Labels,
		ValidateOptions: manifest.ValidateOptions{AllowPaths: c.AllowPaths, CheckAllowPaths: true}})
	if err != nil {
		return nil, fmt.Errorf("invalid manifests for device %s at %s:\n%w", c.Device, snap.Revision.String(), err)
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
func (t *tick) lockHeldSince(key string, now time.Time, record bool) (time.Time, error) {
	var seen releases
	if _, err := statedir.ReadJSON(statedir.Dir(t.Config.StateDir).Releases(), &seen); err != nil {
		if _, newer := errors.AsType[*statedir.NewerError](err); newer {
			return now, err // a newer tend's record is not written over
		}
		t.logger().Warn("forgetting since when update locks hold the release", keyReason, err.Error())
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
		if err := statedir.WriteJSON(t.Config.StateDir, statedir.ReleasesFile, keep, 0o600); err != nil {
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
