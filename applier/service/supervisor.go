package service

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// Crash-loop backoff: the first restart after an exit comes within 200ms,
// each quick exit after that doubles the wait up to a minute, and an
// instance that ran for stablePeriod starts over.
var (
	restartBackoff = backoff.Exponential{Initial: 200 * time.Millisecond, Max: time.Minute}
	stablePeriod   = 10 * time.Second
)

// crashLoopAfter is how many quick exits in a row make a crash loop, as
// status shows it.
const crashLoopAfter = 3

// Supervisor runs service instances through a Runtime and keeps a record of
// each in stateDir/services/NAME/REPLICA.json, so that the next tend adopts
// them instead of restarting them. When watching (the agent), it sees an
// instance exit at once and restarts it as its restart policy says, with
// crash-loop backoff; a one-shot apply starts instances detached and
// leaves them.
type Supervisor struct {
	rt  Runtime
	dir string // stateDir/services
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
}

// OnRestart makes fn hear every restart of an instance of a service:
// started again after it exited (while watching), or started in place of
// one that ran before (an update, a restart the plan made, a start
// retried, a rollback). fn must not block.
func (s *Supervisor) OnRestart(fn func(service string)) { s.onRestart.Store(&fn) }

func (s *Supervisor) restarted(service string) {
	if fn := s.onRestart.Load(); fn != nil {
		(*fn)(service)
	}
}

type instanceKey struct {
	service string
	replica int
}

// instanceRecord is what is kept on disk about one running instance.
type instanceRecord struct {
	Instance  Instance  `json:"instance"`
	Proc      Proc      `json:"proc"`
	SpecHash  string    `json:"specHash"`
	Policy    string    `json:"restart"`
	StartedAt time.Time `json:"startedAt"`
	Restarts  int       `json:"restarts"`
	Crashes   int       `json:"crashes"` // quick exits in a row
	LastExit  string    `json:"lastExit,omitempty"`
	CleanExit bool      `json:"cleanExit,omitempty"` // the last exit was a clean exit 0
	// BootID is the kernel's boot id when the process started: after a
	// reboot, a pid and start time can match another process.
	BootID string `json:"bootID,omitempty"`
	// Probe, when the service has one, is checked every interval while
	// the agent watches: failureThreshold failures in a row restart it.
	Probe *Probe `json:"probe,omitempty"`
	// Inputs are what the resources the service depends on were declared
	// as when this instance started (see render.Service.Inputs); nil in a
	// record of an older tend.
	Inputs map[string]string `json:"inputs,omitempty"`
	// Starting, when set, says the instance was being started then and
	// its process is not known: tend died between the start and this
	// record. What it started is found and stopped (see sweep).
	Starting *time.Time `json:"starting,omitempty"`
}

// Spec is how an instance runs, besides the instance itself.
type Spec struct {
	Hash   string        // of the service's expanded spec
	Policy string        // restart policy: always (""), on-failure, never
	Grace  time.Duration // between SIGTERM and SIGKILL when stopped
	Probe  *Probe        // nil: none
	Inputs map[string]string
}

// instance is a record and what the supervisor does with it now.
type instance struct {
	rec      instanceRecord
	stopping bool          // stopped on purpose: not restarted
	pending  bool          // exited; a restart is scheduled
	cancel   chan struct{} // closed to end its watcher
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
	PID       int    // of the process, while it is alive
	Health    string // HealthOK, or HealthFailing and why; "" without a probe or while not watched
	Limits    string // a warning when resource limits could not be applied
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

// NewSupervisor returns a supervisor keeping its records in stateDir.
func NewSupervisor(stateDir string, rt Runtime, log *slog.Logger) *Supervisor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Supervisor{rt: rt, dir: filepath.Join(stateDir, "services"), log: log, now: time.Now,
		inst: map[instanceKey]*instance{}, keys: map[instanceKey]*sync.Mutex{}, health: map[instanceKey]string{},
		stop: make(chan struct{})}
}

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
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
		m.Unlock()
	}, nil
}

// lockPoll is how often a replica's lock held by another process is tried
// again.
const lockPoll = 20 * time.Millisecond

// flockKey takes the flock of replica k's lock file, waiting (until ctx
// ends) for another process that holds it.
func (s *Supervisor) flockKey(ctx context.Context, k instanceKey) (*os.File, error) {
	dir := filepath.Join(s.dir, k.service)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(k.replica)+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	err = flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
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
		err = flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func flock(f *os.File, how int) error {
	for {
		if err := syscall.Flock(int(f.Fd()), how); err != syscall.EINTR {
			return err
		}
	}
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
			logKeyReplica, r.Instance.Replica, logKeyPID, r.Proc.PID)
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
			Alive: s.alive(r), CrashLoop: r.Crashes >= crashLoopAfter, Limits: r.Proc.Limits, Inputs: r.Inputs}
		if st.Alive {
			st.PID = r.Proc.PID
		}
		// Done only for an exit seen: after a reboot nothing was seen, and
		// the service starts again.
		st.Done = !st.Alive && r.LastExit != "" && r.BootID == bootID() &&
			(r.Policy == manifest.RestartNever || r.Policy == manifest.RestartOnFailure && r.CleanExit)
		s.mu.Lock()
		key := instanceKey{name, r.Instance.Replica}
		if in := s.inst[key]; in != nil && in.pending {
			st.Pending = true
		}
		if in := s.inst[key]; st.Alive && in != nil && in.rec.Proc == r.Proc {
			st.Health = s.health[key]
		}
		s.mu.Unlock()
		out = append(out, st)
	}
	return out, nil
}

// Run starts one instance, first stopping the one running in its place.
func (s *Supervisor) Run(ctx context.Context, in Instance, spec Spec) (Proc, error) {
	key := instanceKey{in.Service, in.Replica}
	unlock, err := s.lockKey(ctx, key)
	if err != nil {
		return Proc{}, err
	}
	defer unlock()
	restarts, again := 0, false
	if old, err := s.readRecord(key); err == nil && old != nil {
		restarts, again = old.Restarts, old.Starting == nil
		if err := s.halt(ctx, key, old, spec.Grace); err != nil {
			return Proc{}, err
		}
		failpoint.Hit("service:stopped")
	}
	rec := instanceRecord{Instance: in, SpecHash: spec.Hash, Policy: spec.Policy, Restarts: restarts, BootID: bootID(),
		Probe: spec.Probe, Inputs: spec.Inputs}
	proc, err := s.start(ctx, key, &rec)
	if err != nil {
		_ = os.Remove(s.recordPath(key))
		return proc, fmt.Errorf("start replica %d: %w", in.Replica, err)
	}
	if proc.Limits != "" {
		s.log.WarnContext(ctx, proc.Limits, logKeyResource, planner.ServiceID(in.Service), logKeyReplica, in.Replica)
	}
	failpoint.Hit("service:started")
	rec.Proc, rec.StartedAt = proc, s.now()
	if err := s.writeRecord(rec); err != nil {
		_ = s.rt.Stop(ctx, proc, spec.Grace)
		return proc, err
	}
	failpoint.Hit("service:recorded")
	if again {
		s.restarted(in.Service)
	}
	s.log.InfoContext(ctx, "service started", logKeyResource, planner.ServiceID(in.Service), logKeyReplica, in.Replica, logKeyPID, proc.PID)
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
	running := s.rt.Alive(rec.Proc)
	if err := s.rt.Stop(ctx, rec.Proc, grace); err != nil {
		return fmt.Errorf("stop %s replica %d (pid %d): %w", planner.ServiceID(key.service), key.replica, rec.Proc.PID, err)
	}
	if err := os.Remove(s.recordPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	attrs := []any{logKeyResource, planner.ServiceID(key.service), logKeyReplica, key.replica, logKeyPID, rec.Proc.PID}
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
func (s *Supervisor) start(ctx context.Context, key instanceKey, rec *instanceRecord) (Proc, error) {
	rec.Instance.Invocation = newInvocation()
	intent := *rec
	now := s.now()
	intent.Proc, intent.BootID, intent.Starting = Proc{}, bootID(), &now
	if err := s.writeRecord(intent); err != nil {
		return Proc{}, err
	}
	failpoint.Hit("service:starting")
	return s.rt.Start(ctx, rec.Instance)
}

// newInvocation returns a fresh Instance.Invocation: 128 random bits.
func newInvocation() string {
	return rand.Text()
}

// sweep stops what an instance whose start was not recorded (tend died in
// between) left running, found by the runtime, and forgets the record.
func (s *Supervisor) sweep(ctx context.Context, key instanceKey, rec *instanceRecord, grace time.Duration) error {
	if f, ok := s.rt.(Sweeper); ok && (rec.BootID == "" || rec.BootID == bootID()) {
		orphans, err := f.Orphans(rec.Instance, *rec.Starting)
		if err != nil {
			return fmt.Errorf("find what %s replica %d started: %w", planner.ServiceID(key.service), key.replica, err)
		}
		for _, p := range orphans {
			if err := s.rt.Stop(ctx, p, grace); err != nil {
				return fmt.Errorf("stop %s replica %d (pid %d), started but not recorded: %w", planner.ServiceID(key.service), key.replica, p.PID, err)
			}
			s.log.WarnContext(ctx, "stopped an instance whose start was not recorded", logKeyResource, planner.ServiceID(key.service),
				logKeyReplica, key.replica, logKeyPID, p.PID)
		}
	}
	if err := os.Remove(s.recordPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// running returns the process recorded for a replica when it runs.
func (s *Supervisor) running(name string, replica int) (Proc, bool) {
	rec, err := s.readRecord(instanceKey{name, replica})
	if err != nil || rec == nil || rec.Starting != nil || !s.alive(*rec) {
		return Proc{}, false
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

// watchInstance waits for in's process to exit and restarts it as its
// policy says, after a backoff that grows while it keeps exiting quickly.
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
			go s.monitor(mctx, in.rec)
			st, err := s.rt.Wait(ctx, in.rec.Proc)
			stopMonitor()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				s.log.Error("watch service", logKeyResource, planner.ServiceID(in.rec.Instance.Service), logKeyError, err.Error())
				return
			}
			next, ok := s.exited(ctx, in, st)
			if !ok {
				return
			}
			in = next
		}
	}()
}

// monitor checks a running instance's health probe until ctx ends; an
// instance that turns unhealthy is stopped, and its watcher restarts it as
// its policy says.
func (s *Supervisor) monitor(ctx context.Context, rec instanceRecord) {
	if rec.Probe == nil {
		return
	}
	key := instanceKey{rec.Instance.Service, rec.Instance.Replica}
	s.setHealth(key, HealthOK) // it passed its probe to be started, or ran when adopted
	rec.Probe.Monitor(ctx, func(healthy bool, err error) {
		if healthy {
			s.setHealth(key, HealthOK)
			return
		}
		s.setHealth(key, HealthFailing+": "+err.Error())
		s.log.ErrorContext(ctx, "service unhealthy; restarting it", logKeyResource, planner.ServiceID(rec.Instance.Service),
			logKeyReplica, rec.Instance.Replica, logKeyPID, rec.Proc.PID, logKeyError, err.Error())
		_ = s.rt.Stop(ctx, rec.Proc, DefaultStopTimeout)
	})
}

func (s *Supervisor) setHealth(key instanceKey, h string) {
	s.mu.Lock()
	s.health[key] = h
	s.mu.Unlock()
}

// exited handles an exit: it records it and, when the policy says so,
// restarts the instance after the backoff, returning it with its new
// process. Each step holds the replica's lock and first checks that the
// instance is still the one this supervisor runs and that the record on
// disk still names the process that exited: a tick that replaced or
// stopped the replica meanwhile (here, or a `tend apply` in another
// process) wins, and nothing is restarted behind its back.
func (s *Supervisor) exited(ctx context.Context, in *instance, st ExitStatus) (*instance, bool) {
	key := instanceKey{in.rec.Instance.Service, in.rec.Instance.Replica}
	rec := in.rec
	id := planner.ServiceID(key.service)
	ran := s.now().Sub(rec.StartedAt)
	rec.LastExit, rec.CleanExit = st.String(), !st.Failed()
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
		"exit", rec.LastExit, "in", delay.String(), "crashes", rec.Crashes)
	if backoff.Sleep(ctx, delay) != nil {
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
	proc, err := s.start(ctx, key, &rec)
	if err != nil {
		_ = s.writeRecord(rec) // the exit it recorded, not the start
		s.log.ErrorContext(ctx, "restart service", logKeyResource, id, logKeyReplica, key.replica, logKeyError, err.Error())
		s.mu.Lock()
		in.pending = false
		s.mu.Unlock()
		return nil, false
	}
	rec.Proc, rec.StartedAt = proc, s.now()
	rec.Restarts++
	s.log.InfoContext(ctx, "service restarted", logKeyResource, id, logKeyReplica, key.replica, logKeyPID, proc.PID, "restarts", rec.Restarts)
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
		logKeyPID, rec.Proc.PID)
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
	return err == nil && disk != nil && disk.Proc.PID == proc.PID && disk.Proc.StartTime == proc.StartTime
}

// alive reports whether the process of r runs, in this boot.
func (s *Supervisor) alive(r instanceRecord) bool {
	return (r.BootID == "" || r.BootID == bootID()) && s.rt.Alive(r.Proc)
}

// bootID is the kernel's id of this boot.
var bootID = sync.OnceValue(func() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
})

func (s *Supervisor) recordPath(k instanceKey) string {
	return filepath.Join(s.dir, k.service, strconv.Itoa(k.replica)+".json")
}

func (s *Supervisor) readRecord(k instanceKey) (*instanceRecord, error) {
	var r instanceRecord
	found, err := atomicfile.ReadJSON(s.recordPath(k), &r)
	if errors.Is(err, atomicfile.ErrCorrupt) {
		return nil, fmt.Errorf("%w; stop the process by hand and remove the file", err)
	}
	if err != nil || !found {
		return nil, err
	}
	return &r, nil
}

func (s *Supervisor) writeRecord(r instanceRecord) error {
	// A record holds the service's environment, which may hold secrets:
	// readable by tend alone.
	dir := filepath.Join(s.dir, r.Instance.Service)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteJSON(dir, strconv.Itoa(r.Instance.Replica)+".json", r, 0o600)
}

// serviceRecords reads the instance records of one service, by replica.
func (s *Supervisor) serviceRecords(name string) ([]instanceRecord, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []instanceRecord
	for _, e := range entries {
		n, ok := strings.CutSuffix(e.Name(), ".json")
		replica, err := strconv.Atoi(n)
		if !ok || err != nil {
			continue
		}
		r, err := s.readRecord(instanceKey{name, replica})
		if err != nil {
			return nil, err
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(a, b instanceRecord) int { return a.Instance.Replica - b.Instance.Replica })
	return out, nil
}

// records reads every instance record.
func (s *Supervisor) records() ([]instanceRecord, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []instanceRecord
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			recs, err := s.serviceRecords(e.Name())
			errs = append(errs, err)
			out = append(out, recs...)
		}
	}
	return out, errors.Join(errs...)
}
