package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// watchInstance waits for in's process to exit and restarts it as its
// policy says, after a backoff that grows while it keeps exiting quickly.
// Such a restart never waits for the service's updateLock: only releases
// do (the agent's decide step), and the process that held it is gone.
func (s *Supervisor) watchInstance(in *instance) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stopped := in.cancel // exited returns the same instance: one channel for its life
		go func() {
			select {
			case <-s.stop:
			case <-stopped:
			}
			cancel()
		}()
		for {
			mctx, stopMonitor := context.WithCancel(ctx)
			go s.monitor(mctx, in, in.rec)
			st, err := in.rec.Proc.Wait(ctx)
			seen := time.Now()
			stopMonitor()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				s.log.Error("watch service", logKeyResource, planner.ServiceID(in.rec.Instance.Service), logKeyError, err.Error())
				return
			}
			next, ok := s.exited(ctx, in, st, seen)
			if !ok {
				return
			}
			in = next
		}
	}()
}

// monitor checks the health probe of in, running as rec, until ctx ends;
// an instance that turns unhealthy is stopped, and its watcher restarts it
// as its policy says (a container the stop removed is not taken for one
// removed outside tend).
func (s *Supervisor) monitor(ctx context.Context, in *instance, rec instanceRecord) {
	if rec.Probe == nil {
		return
	}
	key := instanceKey{rec.Instance.Service, rec.Instance.Replica}
	s.setHealth(key, HealthOK) // until its probe fails; a start has its grace (see Monitor)
	rec.Probe.Monitor(ctx, rec.StartedAt, func(healthy bool, err error) {
		if healthy {
			s.setHealth(key, HealthOK)
			return
		}
		s.setHealth(key, HealthFailing+": "+err.Error())
		s.log.ErrorContext(ctx, "service unhealthy; restarting it", logKeyResource, planner.ServiceID(rec.Instance.Service),
			logKeyReplica, rec.Instance.Replica, logKeyPID, rec.Proc.PID(), logKeyError, err.Error())
		s.mu.Lock()
		in.unhealthy = true
		s.mu.Unlock()
		if e, ok := rec.Proc.(Ender); ok {
			_ = e.End(ctx, DefaultStopTimeout) // kept, to restart in place
			return
		}
		_ = rec.Proc.Stop(ctx, DefaultStopTimeout)
	})
}

func (s *Supervisor) setHealth(key instanceKey, h string) {
	s.mu.Lock()
	s.health[key] = h
	s.mu.Unlock()
}

// exited handles an exit, which its watcher saw at seen: it records it
// and, when the policy says so, restarts the instance the backoff's delay
// after the exit (in place when its runtime can: see Restarter),
// returning it with its new process. Each step holds the replica's lock
// and first checks that the instance is still the one this supervisor
// runs and that the record on disk still names the process that exited:
// a tick that replaced or stopped the replica meanwhile (here, or a `tend
// apply` in another process) wins, and nothing is restarted behind its
// back.
func (s *Supervisor) exited(ctx context.Context, in *instance, st ExitStatus, seen time.Time) (*instance, bool) {
	key := instanceKey{in.rec.Instance.Service, in.rec.Instance.Replica}
	s.mu.Lock()
	unhealthy := in.unhealthy // its probe's stop ended it (and removed it, if it was removed)
	in.unhealthy = false
	s.mu.Unlock()
	if st.Removed && !unhealthy {
		s.removed(ctx, key, in, st)
		return nil, false
	}
	st.Removed = false
	rec := in.rec
	id := planner.ServiceID(key.service)
	now := s.now()
	at := exitTime(st.At, now)
	ran := at.Sub(rec.StartedAt)
	rec.LastExit, rec.LastExitAt, rec.CleanExit = st.String(), at, !st.Failed()
	if ran < stablePeriod {
		rec.Crashes++
	} else {
		rec.Crashes = 1
	}
	restart := rec.Policy == manifest.RestartAlways || rec.Policy == "" || rec.Policy == manifest.RestartOnFailure && st.Failed()
	unlock, err := s.lockKey(ctx, key)
	if err != nil {
		return nil, false // stopping
	}
	if !s.owns(key, in) {
		s.giveUp(ctx, key, in)
		unlock()
		return nil, false
	}
	s.point("exited:owned")
	s.mu.Lock()
	in.pending = restart
	s.mu.Unlock()
	_ = s.writeRecord(rec)
	unlock()
	if !restart {
		s.log.WarnContext(ctx, "service exited", logKeyResource, id, logKeyReplica, key.replica, "exit", rec.LastExit, "restart", rec.Policy)
		return nil, false
	}
	delay := restartBackoff.Delay(rec.Crashes)
	level := slog.LevelWarn
	if rec.Crashes >= crashLoopAfter {
		level = slog.LevelError
	}
	s.log.Log(ctx, level, "service exited; restarting", logKeyResource, id, logKeyReplica, key.replica,
		"exit", rec.LastExit, "in", roundDuration(delay), "crashes", rec.Crashes)
	// The delay counts from the exit, as the engine's own restart policy
	// counts it: the time it took to hear of it and record it is part of
	// it.
	if backoff.Sleep(ctx, delay-now.Sub(at)-time.Since(seen)) != nil {
		return nil, false
	}
	unlock, err = s.lockKey(ctx, key)
	if err != nil {
		return nil, false
	}
	defer unlock()
	if !s.owns(key, in) {
		s.giveUp(ctx, key, in)
		return nil, false
	}
	exitedProc := rec.Proc
	proc, inPlace, err := s.restart(ctx, key, &rec)
	if err != nil {
		_ = s.writeRecord(rec) // the exit it recorded, not the start
		s.log.ErrorContext(ctx, "restart service", logKeyResource, id, logKeyReplica, key.replica, logKeyError, err.Error())
		s.mu.Lock()
		in.pending = false
		s.mu.Unlock()
		return nil, false
	}
	rec.Prev, rec.Proc, rec.StartedAt = exitedProc, proc, s.now()
	rec.Restarts++
	s.log.InfoContext(ctx, "service restarted", logKeyResource, id, logKeyReplica, key.replica, logKeyPID, proc.PID(),
		"restarts", rec.Restarts, "inPlace", inPlace)
	if err := s.writeRecord(rec); err != nil {
		s.log.ErrorContext(ctx, "record service", logKeyResource, id, logKeyError, err.Error())
	}
	s.mu.Lock()
	in.rec, in.pending = rec, false
	s.mu.Unlock()
	s.restarted(key.service)
	s.point("exited:restarted")
	return in, true
}

// exitTime is when an exit happened: at, the runtime's time for it, when
// that is plausible on this clock (not after now, nor long before it: an
// engine on another host may keep another time), else now.
func exitTime(at, now time.Time) time.Time {
	if at.IsZero() || at.After(now) || now.Sub(at) > time.Second {
		return now
	}
	return at
}

// restart starts rec's instance again after its exit: in place when its
// runtime can (see Restarter), keeping its invocation; else, and when the
// runtime says the instance must be created anew, as a new instance under
// a new invocation (see start). A restart in place needs no record that
// it is starting: the record names the instance already, and a tend that
// dies before it records the new process finds that instance not alive
// (another process) and replaces it as drift.
func (s *Supervisor) restart(ctx context.Context, key instanceKey, rec *instanceRecord) (Handle, bool, error) {
	rt, err := s.rts.Get(rec.Kind)
	if err != nil {
		return nil, false, err
	}
	if r, ok := rt.(Restarter); ok && rec.Proc != nil {
		h, err := r.Restart(ctx, rec.Instance, rec.Proc)
		if err == nil {
			return h, true, nil
		}
		if !errors.Is(err, ErrRecreate) {
			return nil, false, err
		}
		s.log.InfoContext(ctx, "service instance not restarted in place; starting a new one", logKeyResource, planner.ServiceID(key.service),
			logKeyReplica, key.replica, logKeyError, err.Error())
	}
	h, err := s.start(ctx, key, rec)
	return h, false, err
}

// removed handles an instance removed outside tend (a container removed
// by hand): drift, not a crash. It is not restarted here, and no crash is
// counted against it; its record says it was removed, so that the next
// tick's plan sees the replica down and restores it as drift, and
// OnRemoved asks for that tick now. As for an exit, a tick that replaced
// or stopped the replica meanwhile wins.
func (s *Supervisor) removed(ctx context.Context, key instanceKey, in *instance, st ExitStatus) {
	unlock, err := s.lockKey(ctx, key)
	if err != nil {
		return // stopping
	}
	if !s.owns(key, in) {
		s.giveUp(ctx, key, in)
		unlock()
		return
	}
	rec := in.rec
	rec.LastExit, rec.CleanExit, rec.Removed = st.String(), false, true
	s.mu.Lock()
	in.pending = false
	s.mu.Unlock()
	if err := s.writeRecord(rec); err != nil {
		s.log.ErrorContext(ctx, "record service", logKeyResource, planner.ServiceID(key.service), logKeyError, err.Error())
	}
	unlock()
	s.log.WarnContext(ctx, "service instance removed outside tend: drift, restored by the next tick", logKeyResource, planner.ServiceID(key.service),
		logKeyReplica, key.replica, logKeyPID, pidOf(rec.Proc))
	if fn := s.onRemoved.Load(); fn != nil {
		(*fn)(key.service)
	}
	s.point("exited:removed")
}

// giveUp lets go of in, which is no longer the instance of key: Run or
// Halt replaced or stopped it here, or another process's tend (a one-shot
// apply) replaced it. Its restart is no longer pending. An instance another
// process recorded and that runs is adopted, watched as this supervisor's
// own. The caller holds the key's lock.
func (s *Supervisor) giveUp(ctx context.Context, key instanceKey, in *instance) {
	s.mu.Lock()
	in.pending = false
	mine := s.inst[key] == in && !in.stopping
	watching := s.watching
	s.mu.Unlock()
	s.point("exited:gave-up")
	if !mine || !watching {
		return
	}
	rec, err := s.readRecord(key)
	if err != nil || rec == nil || rec.Starting != nil || !s.alive(*rec) {
		s.mu.Lock()
		if s.inst[key] == in {
			delete(s.inst, key)
		}
		s.mu.Unlock()
		return
	}
	s.log.InfoContext(ctx, "service adopted", logKeyResource, planner.ServiceID(key.service), logKeyReplica, key.replica,
		logKeyPID, rec.Proc.PID())
	s.watchInstance(s.track(*rec))
	s.point("exited:adopted")
}

// owns reports whether in is still the instance of key that this
// supervisor runs, and the record on disk still names its process.
// The caller holds the key's lock.
func (s *Supervisor) owns(key instanceKey, in *instance) bool {
	s.mu.Lock()
	current := !in.stopping && s.inst[key] == in
	proc := in.rec.Proc
	s.mu.Unlock()
	if !current {
		return false
	}
	disk, err := s.readRecord(key)
	return err == nil && disk != nil && disk.Proc != nil && sameHandle(disk.Proc, proc)
}

// alive reports whether the process of r runs, in this boot.
func (s *Supervisor) alive(r instanceRecord) bool {
	return (r.BootID == "" || r.BootID == bootID()) && r.Proc != nil && r.Proc.Alive()
}
