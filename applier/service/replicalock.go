package service

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/tend-dev/tend/internal/flock"
	"github.com/tend-dev/tend/planner"
)

// lockKey serialises everything that starts or stops one replica: within
// this process with a mutex, and across processes (the agent's watcher and
// a `tend apply`) with an flock on stateDir/services/NAME/REPLICA.lock, so
// that which process owns the replica is decided by one of them at a time.
// Waiting for the other process ends with ctx (an agent that stops does not
// wait for a `tend apply`).
func (s *Supervisor) lockKey(ctx context.Context, k instanceKey) (func(), error) {
	s.mu.Lock()
	m := s.keys[k]
	if m == nil {
		m = &sync.Mutex{}
		s.keys[k] = m
	}
	s.mu.Unlock()
	m.Lock()
	if err := ctx.Err(); err != nil {
		// Stopped while it waited (the replica was halted): make no lock
		// file in a folder that may be on its way out.
		m.Unlock()
		return nil, fmt.Errorf("wait for the lock of %s replica %d: %w", planner.ServiceID(k.service), k.replica, err)
	}
	f, err := s.flockKey(ctx, k)
	if ctx.Err() != nil {
		m.Unlock()
		return nil, fmt.Errorf("wait for the lock of %s replica %d: %w", planner.ServiceID(k.service), k.replica, ctx.Err())
	}
	if err != nil {
		// Without the file the mutex still orders this process: the
		// other one may race, which the log says.
		s.log.Warn("replica lock file unusable; only this process is serialised", logKeyResource, planner.ServiceID(k.service),
			logKeyReplica, k.replica, logKeyError, err.Error())
		return m.Unlock, nil
	}
	return func() {
		_ = flock.Flock(f, flock.Unlock)
		_ = f.Close()
		m.Unlock()
	}, nil
}

// flockKey takes the flock of replica k's lock file, waiting (until ctx
// ends) for another process that holds it.
func (s *Supervisor) flockKey(ctx context.Context, k instanceKey) (*os.File, error) {
	dir := s.dir.Service(k.service)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(s.dir.InstanceLock(k.service, k.replica), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	err = flock.Flock(f, flock.Exclusive|flock.NonBlocking)
	if err == syscall.EWOULDBLOCK {
		s.point("lock:busy") // another process holds it: wait
	}
	for err == syscall.EWOULDBLOCK {
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(lockPoll):
		}
		err = flock.Flock(f, flock.Exclusive|flock.NonBlocking)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// lockPoll is how often a replica's lock held by another process is tried
// again.
const lockPoll = 20 * time.Millisecond
