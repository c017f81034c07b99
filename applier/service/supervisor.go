package service

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// Crash-loop backoff, as Docker's restart policy: the first restart comes
// 100ms after the exit, each quick exit after that doubles the wait up to
// a minute, and an instance that ran for stablePeriod starts over.
var (
	restartBackoff = backoff.Exponential{Initial: 100 * time.Millisecond, Max: time.Minute}
	stablePeriod   = 10 * time.Second
)

// crashLoopAfter is how many quick exits in a row make a crash loop, as
// status shows it.
const crashLoopAfter = 3

// Supervisor runs service instances through the runtime of each one's
// kind and keeps a record of
// each in stateDir/services/NAME/REPLICA.json, so that the next tend adopts
// them instead of restarting them. When watching (the agent), it sees an
// instance exit at once and restarts it as its restart policy says, with
// crash-loop backoff; a one-shot apply starts instances detached and
// leaves them.
type Supervisor struct {
	rts *Runtimes
	dir statedir.Services
	log *slog.Logger
	now func() time.Time

	mu       sync.Mutex
	watching bool
	stop     chan struct{} // closed by Stop: watchers end
	wg       sync.WaitGroup
	inst     map[instanceKey]*instance
	keys     map[instanceKey]*sync.Mutex // one per replica: Run, Halt and a restart never overlap
	health   map[instanceKey]string      // what the probe of a watched instance last said (see Health*)

	hook      atomic.Pointer[func(point string)] // tests: where the supervisor is
	onRestart atomic.Pointer[func(service string)]
	onRemoved atomic.Pointer[func(service string)]
}

// OnRestart makes fn hear every restart of an instance of a service:
// started again after it exited (while watching), or started in place of
// one that ran before (an update, a restart the plan made, a start
// retried, a rollback). fn must not block.
func (s *Supervisor) OnRestart(fn func(service string)) { s.onRestart.Store(&fn) }

// OnRemoved makes fn hear every watched instance of a service that was
// removed outside tend (a container removed by hand): drift, which the
// supervisor leaves to the next tick to restore, without counting a
// crash. The agent ticks at once. fn must not block.
func (s *Supervisor) OnRemoved(fn func(service string)) { s.onRemoved.Store(&fn) }

func (s *Supervisor) restarted(service string) {
	if fn := s.onRestart.Load(); fn != nil {
		(*fn)(service)
	}
}

type instanceKey struct {
	service string
	replica int
}

// RunSpec is how the supervisor runs an instance, besides what the
// instance runs.
type RunSpec struct {
	Hash   string        // of the service's expanded spec
	Policy string        // restart policy: always (""), on-failure, never
	Grace  time.Duration // between SIGTERM and SIGKILL when stopped
	Probe  *Probe        // nil: none
	Inputs map[string]string
}

// instance is a record and what the supervisor does with it now.
type instance struct {
	rec       instanceRecord
	stopping  bool          // stopped on purpose: not restarted
	pending   bool          // exited; a restart is scheduled
	unhealthy bool          // its probe failed and the supervisor stopped it
	cancel    chan struct{} // closed to end its watcher
}

// InstanceState is what Instances reports about one replica.
type InstanceState struct {
	Replica  int
	SpecHash string
	Alive    bool
	Pending  bool // exited and about to be restarted by the supervisor
	// Done: exited, and its restart policy says it stays down (never, or
	// on-failure after a clean exit). It needs no restart.
	Done      bool
	CrashLoop bool
	Restarts  int
	LastExit  string
	// LastExitAt is when it last exited (zero when LastExit is "").
	LastExitAt time.Time
	PID        int    // of the process, while it is alive
	Container  string // a container's id, while it is alive
	Image      string // a container's image, by digest
	Health     string // HealthOK, or HealthFailing and why; "" without a probe or while not watched
	Limits     string // a warning when resource limits could not be applied
	// Inputs are what its dependencies were declared as when it started;
	// nil when its record does not say.
	Inputs map[string]string
}

// What the health probe of a watched instance says, as InstanceState.Health
// reports it.
const (
	HealthOK      = "healthy"
	HealthFailing = "unhealthy" // followed by ": " and the last failure
)

// NewSupervisor returns a supervisor running instances on rts and keeping
// its records in stateDir.
func NewSupervisor(stateDir string, rts *Runtimes, log *slog.Logger) *Supervisor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Supervisor{rts: rts, dir: statedir.Dir(stateDir).Services(), log: log, now: time.Now,
		inst: map[instanceKey]*instance{}, keys: map[instanceKey]*sync.Mutex{}, health: map[instanceKey]string{},
		stop: make(chan struct{})}
}

// point tells a test where the supervisor is; nil outside tests.
func (s *Supervisor) point(name string) {
	if h := s.hook.Load(); h != nil {
		(*h)(name)
	}
}

// Start adopts every recorded instance still running and from then on
// watches them: an instance that exits is restarted as its policy says, and
// one whose health probe fails is stopped and restarted. Stop ends the
// watching, not the services. A supervisor that is never started runs
// instances detached and leaves them (a one-shot apply).
func (s *Supervisor) Start(ctx context.Context) error {
	recs, err := s.records()
	s.mu.Lock()
	s.watching = true
	s.mu.Unlock()
	for _, r := range recs {
		if !s.alive(r) {
			continue // the next reconcile starts it again, as drift
		}
		in := s.track(r)
		s.log.InfoContext(ctx, "service adopted", logKeyResource, planner.ServiceID(r.Instance.Service),
			logKeyReplica, r.Instance.Replica, logKeyPID, pidOf(r.Proc))
		s.watchInstance(in)
	}
	return err
}

// Stop ends the watching and waits for the watchers; services keep
// running.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	if s.watching {
		s.watching = false
		close(s.stop)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Instances returns the recorded instances of a service, by replica.
func (s *Supervisor) Instances(name string) ([]InstanceState, error) {
	recs, err := s.serviceRecords(name)
	if err != nil {
		return nil, err
	}
	out := make([]InstanceState, 0, len(recs))
	for _, r := range recs {
		st := InstanceState{Replica: r.Instance.Replica, SpecHash: r.SpecHash, Restarts: r.Restarts, LastExit: r.LastExit,
			LastExitAt: r.LastExitAt, Alive: s.alive(r), CrashLoop: r.Crashes >= crashLoopAfter, Limits: warningOf(r.Proc), Inputs: r.Inputs}
		if st.Alive {
			st.PID = r.Proc.PID()
			if c, ok := r.Proc.(ContainerHandle); ok {
				st.Container = c.ContainerID()
			}
		}
		if im, ok := r.Instance.Spec.(ImageSpec); ok {
			st.Image = im.ImageRef()
		}
		// Done only for an exit seen: after a reboot nothing was seen, and
		// the service starts again. An instance removed outside tend is
		// drift, whatever its policy.
		st.Done = !st.Alive && r.LastExit != "" && !r.Removed && r.BootID == bootID() &&
			(r.Policy == manifest.RestartNever || r.Policy == manifest.RestartOnFailure && r.CleanExit)
		s.mu.Lock()
		key := instanceKey{name, r.Instance.Replica}
		if in := s.inst[key]; in != nil && in.pending {
			st.Pending = true
		}
		if in := s.inst[key]; st.Alive && in != nil && sameHandle(in.rec.Proc, r.Proc) {
			st.Health = s.health[key]
		}
		s.mu.Unlock()
		out = append(out, st)
	}
	return out, nil
}

// Run starts one instance, first stopping the one running in its place.
func (s *Supervisor) Run(ctx context.Context, in Instance, spec RunSpec) (Handle, error) {
	key := instanceKey{in.Service, in.Replica}
	if in.Spec == nil {
		return nil, fmt.Errorf("start %s replica %d: no spec", planner.ServiceID(in.Service), in.Replica)
	}
	unlock, err := s.lockKey(ctx, key)
	if err != nil {
		return nil, err
	}
	defer unlock()
	restarts, again := 0, false
	var prev Handle
	if old, err := s.readRecord(key); err == nil && old != nil {
		restarts, again = old.Restarts, old.Starting == nil
		if again {
			prev = old.Proc
		}
		if err := s.halt(ctx, key, old, spec.Grace); err != nil {
			return nil, err
		}
		failpoint.Hit("service:stopped")
	}
	rec := instanceRecord{Kind: in.Spec.Kind(), Instance: in, Prev: prev, recordState: recordState{SpecHash: spec.Hash, Policy: spec.Policy,
		Restarts: restarts, BootID: bootID(), Probe: spec.Probe, Inputs: spec.Inputs}}
	proc, err := s.start(ctx, key, &rec)
	if err != nil {
		_ = os.Remove(s.recordPath(key))
		return proc, fmt.Errorf("start replica %d: %w", in.Replica, err)
	}
	if w := warningOf(proc); w != "" {
		s.log.WarnContext(ctx, w, logKeyResource, planner.ServiceID(in.Service), logKeyReplica, in.Replica)
	}
	failpoint.Hit("service:started")
	rec.Proc, rec.StartedAt = proc, s.now()
	if err := s.writeRecord(rec); err != nil {
		_ = proc.Stop(ctx, spec.Grace)
		return proc, err
	}
	failpoint.Hit("service:recorded")
	if again {
		s.restarted(in.Service)
	}
	s.log.InfoContext(ctx, "service started", logKeyResource, planner.ServiceID(in.Service), logKeyReplica, in.Replica, logKeyPID, proc.PID())
	s.mu.Lock()
	watching := s.watching
	s.mu.Unlock()
	if watching {
		s.watchInstance(s.track(rec))
	}
	return proc, nil
}

// Halt stops one instance on purpose and forgets it.
func (s *Supervisor) Halt(ctx context.Context, name string, replica int, grace time.Duration) error {
	key := instanceKey{name, replica}
	unlock, err := s.lockKey(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := s.readRecord(key)
	if err != nil || rec == nil {
		return err
	}
	return s.halt(ctx, key, rec, grace)
}

func (s *Supervisor) halt(ctx context.Context, key instanceKey, rec *instanceRecord, grace time.Duration) error {
	if rec.Starting != nil {
		return s.sweep(ctx, key, rec, grace)
	}
	s.mu.Lock()
	if in := s.inst[key]; in != nil {
		in.stopping = true
		close(in.cancel)
		delete(s.inst, key)
	}
	s.mu.Unlock()
	running := rec.Proc != nil && rec.Proc.Alive()
	if rec.Proc != nil {
		if err := rec.Proc.Stop(ctx, grace); err != nil {
			return fmt.Errorf("stop %s replica %d (pid %d): %w", planner.ServiceID(key.service), key.replica, rec.Proc.PID(), err)
		}
	}
	if err := os.Remove(s.recordPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	attrs := []any{logKeyResource, planner.ServiceID(key.service), logKeyReplica, key.replica, logKeyPID, pidOf(rec.Proc)}
	if !running {
		// Already gone: what it left (its group, its cgroup) was cleaned
		// up, but nothing was stopped.
		if rec.LastExit != "" {
			attrs = append(attrs, logKeyExit, rec.LastExit)
		}
		s.log.InfoContext(ctx, "service was not running; its record is removed", attrs...)
		return nil
	}
	s.log.InfoContext(ctx, "service stopped", attrs...)
	return nil
}

// start starts rec's instance under a new invocation, which it sets in
// rec. Its record says it is being started before it is: if tend dies
// before it knows the process, the next tend finds and stops it (see
// sweep) instead of running a second.
func (s *Supervisor) start(ctx context.Context, key instanceKey, rec *instanceRecord) (Handle, error) {
	rt, err := s.rts.Get(rec.Kind)
	if err != nil {
		return nil, err
	}
	rec.Instance.Invocation = newInvocation()
	intent := *rec
	now := s.now()
	intent.Proc, intent.BootID, intent.Starting = nil, bootID(), &now
	if err := s.writeRecord(intent); err != nil {
		return nil, err
	}
	failpoint.Hit("service:starting")
	return rt.Start(ctx, rec.Instance)
}

// newInvocation returns a fresh Instance.Invocation: 128 random bits.
func newInvocation() string {
	return rand.Text()
}

// sweep stops what an instance whose start was not recorded (tend died in
// between) left running, found by the runtime, and forgets the record.
func (s *Supervisor) sweep(ctx context.Context, key instanceKey, rec *instanceRecord, grace time.Duration) error {
	rt, err := s.rts.Get(rec.Kind)
	if err != nil {
		// Its runtime cannot be asked now (an engine that is down): the
		// record is kept, the only trace of what the start left.
		return fmt.Errorf("find what %s replica %d started: %w", planner.ServiceID(key.service), key.replica, err)
	}
	if f, ok := rt.(Sweeper); ok && (rec.BootID == "" || rec.BootID == bootID()) {
		orphans, err := f.Orphans(ctx, rec.Instance, *rec.Starting)
		if err != nil {
			return fmt.Errorf("find what %s replica %d started: %w", planner.ServiceID(key.service), key.replica, err)
		}
		for _, p := range orphans {
			if err := p.Stop(ctx, grace); err != nil {
				return fmt.Errorf("stop %s replica %d (pid %d), started but not recorded: %w", planner.ServiceID(key.service), key.replica, p.PID(), err)
			}
			s.log.WarnContext(ctx, "stopped an instance whose start was not recorded", logKeyResource, planner.ServiceID(key.service),
				logKeyReplica, key.replica, logKeyPID, p.PID())
		}
	}
	if err := os.Remove(s.recordPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// running returns the process recorded for a replica when it runs.
func (s *Supervisor) running(name string, replica int) (Handle, bool) {
	rec, err := s.readRecord(instanceKey{name, replica})
	if err != nil || rec == nil || rec.Starting != nil || !s.alive(*rec) {
		return nil, false
	}
	return rec.Proc, true
}

// track makes rec the instance the supervisor knows for its key.
func (s *Supervisor) track(rec instanceRecord) *instance {
	in := &instance{rec: rec, cancel: make(chan struct{})}
	s.mu.Lock()
	key := instanceKey{rec.Instance.Service, rec.Instance.Replica}
	if old := s.inst[key]; old != nil {
		close(old.cancel)
	}
	s.inst[key] = in
	s.mu.Unlock()
	return in
}

// bootID is the kernel's id of this boot.
var bootID = sync.OnceValue(func() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
})
