package container

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/tend-dev/tend/applier/service"
)

// DefaultHost is the engine's address when neither Options.Host nor
// DOCKER_HOST names one.
const DefaultHost = "unix:///var/run/docker.sock"

// Labels on every container the runtime creates: the device, the resource
// (service/NAME) and the hash of the spec it runs come from
// Instance.Labels (Runtime.Spec sets them); the runtime sets Replica and
// Invocation.
const (
	LabelDevice     = "dev.tend.device"
	LabelResource   = "dev.tend.resource"
	LabelSpec       = "dev.tend.spec"
	LabelReplica    = "dev.tend.replica"
	LabelInvocation = "dev.tend.invocation"
)

// aliveTimeout bounds Alive's inspect call (Alive has no context).
const aliveTimeout = 10 * time.Second

// Options configure a Runtime.
type Options struct {
	// Host is the engine's address (runtime.docker.host): unix:///…,
	// tcp://…; "" = $DOCKER_HOST, else DefaultHost.
	Host string
	// Keychain gives the credentials the engine pulls with
	// (registries.dockerConfig: transport.Keychain); nil = anonymous pulls.
	Keychain authn.Keychain
	// Log hears what Finish removes; nil discards.
	Log *slog.Logger
	// Confine, when set, bounds what mount sources may lead to (see
	// Confinement); nil checks only that they exist.
	Confine *Confinement
}

// Runtime runs service instances as containers on one engine. It is safe
// for concurrent use.
type Runtime struct {
	host string
	cli  *client.Client
	kc   authn.Keychain
	log  *slog.Logger
	// confine bounds mount sources; nil when Options had none.
	confine *Confinement

	mu sync.Mutex
	// waiting counts, by container id and main pid (a container
	// restarted in place runs another), the Waits in progress: while one
	// waits, the engine has not said the container stopped, and Alive
	// needs no call to the engine (an agent's no-op tick asks it nothing
	// about the containers it watches).
	waiting map[waitKey]int
	// updates follows the engine's update events, for LimitDrift.
	updates updateWatch
}

// New returns a Runtime for the engine at opts.Host. It does not connect:
// the first call negotiates the API version.
func New(opts Options) (*Runtime, error) {
	host := opts.Host
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		host = DefaultHost
	}
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		return nil, fmt.Errorf("container engine at %s: %w (set runtime.docker.host to unix:///PATH or tcp://HOST:PORT)", host, err)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{host: host, cli: cli, kc: opts.Keychain, log: log, confine: opts.Confine}, nil
}

// Host is the engine's address.
func (r *Runtime) Host() string { return r.host }

// Close releases the client's idle connections.
func (r *Runtime) Close() error {
	r.updates.stop()
	return r.cli.Close()
}

// APIVersion pings the engine and returns the API version the client
// negotiated with it (at most what both sides speak).
func (r *Runtime) APIVersion(ctx context.Context) (string, error) {
	if _, err := r.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return "", r.engineError(fmt.Errorf("ping: %w", err))
	}
	return r.cli.ClientVersion(), nil
}

// Alive reports whether p's container is running with the same main
// process. An engine that does not answer (within 10 s) counts as not
// alive: the next Start reports why.
func (r *Runtime) Alive(p Proc) bool {
	if p.Container == "" {
		return false
	}
	r.mu.Lock()
	waited := r.waiting[waitKeyOf(p)] > 0
	r.mu.Unlock()
	if waited {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), aliveTimeout)
	defer cancel()
	res, err := r.cli.ContainerInspect(ctx, p.Container, client.ContainerInspectOptions{})
	if err != nil {
		return false
	}
	c := res.Container
	return c.ID == p.Container && c.State != nil && c.State.Running &&
		(p.PID == 0 || c.State.Pid == p.PID)
}

// Wait blocks until p's container is not running, or ctx ends, and returns
// its exit status from the engine (Known, for every container: the engine
// keeps the status whoever started it). A container removed, or being
// removed, when its exit is read (docker rm -f, or Stop) returns Removed,
// with the exit code when the engine still gave one, once it is gone. The engine reports
// a death by signal N as exit code 128+N, which Wait reads as that
// signal.
func (r *Runtime) Wait(ctx context.Context, p Proc) (service.ExitStatus, error) {
	if !r.Alive(p) {
		// Not running now (or another process in it): nothing to wait
		// for, and no wait to count as alive.
		return r.waited(ctx, p)
	}
	k := waitKeyOf(p)
	r.mu.Lock()
	if r.waiting == nil {
		r.waiting = map[waitKey]int{}
	}
	r.waiting[k]++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.waiting[k]--; r.waiting[k] <= 0 {
			delete(r.waiting, k)
		}
		r.mu.Unlock()
	}()
	return r.waited(ctx, p)
}

// waitKey is what Alive knows a Wait by: a container and its main pid.
type waitKey struct {
	container string
	pid       int
}

func waitKeyOf(p Proc) waitKey { return waitKey{p.Container, p.PID} }

// A wait also asks the engine for the container's state once, a moment
// after it began, then now and then: an engine (Docker 20.10) can miss
// telling a wait that began as the container exited.
const (
	waitFirstCheck = time.Second
	waitRecheck    = time.Minute
)

// waited blocks until p's container is not running and reads how it
// ended.
func (r *Runtime) waited(ctx context.Context, p Proc) (service.ExitStatus, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := r.cli.ContainerWait(wctx, p.Container, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	recheck := time.NewTimer(waitFirstCheck)
	defer recheck.Stop()
	var code int64
wait:
	for {
		select {
		case w := <-res.Result:
			if w.Error != nil && w.Error.Message != "" {
				return service.ExitStatus{}, fmt.Errorf("wait for container %s: %s", short(p.Container), w.Error.Message)
			}
			code = w.StatusCode
			break wait
		case err := <-res.Error:
			if isNotFound(err) {
				return service.ExitStatus{Removed: true}, nil
			}
			if ctx.Err() != nil {
				return service.ExitStatus{}, ctx.Err()
			}
			return service.ExitStatus{}, r.engineError(fmt.Errorf("wait for container %s: %w", short(p.Container), err))
		case <-recheck.C:
			in, err := r.cli.ContainerInspect(ctx, p.Container, client.ContainerInspectOptions{})
			if isNotFound(err) {
				return service.ExitStatus{Removed: true}, nil
			}
			if err == nil && in.Container.State != nil && !in.Container.State.Running {
				code = int64(in.Container.State.ExitCode)
				break wait
			}
			recheck.Reset(waitRecheck)
		}
	}
	st := exitStatus(code)
	// The OOM killer's mark is in the container's state (gone if Stop
	// removed it meanwhile). A removal (docker rm -f) kills the container
	// first: its wait ends with the kill, while the engine shows it as
	// being removed, then not at all.
	in, err := r.cli.ContainerInspect(ctx, p.Container, client.ContainerInspectOptions{})
	if isNotFound(err) || err == nil && in.Container.State != nil && removing(in.Container.State.Status) {
		// Returned once it is gone: what follows (a tick that starts a
		// new one) does not meet the removal half-way.
		_ = r.waitRemoved(ctx, p.Container)
		st.Removed = true
		return st, nil
	}
	if err != nil || in.Container.State == nil || in.Container.HostConfig == nil {
		return st, nil
	}
	if at, err := time.Parse(time.RFC3339Nano, in.Container.State.FinishedAt); err == nil && at.Year() > 1 {
		st.At = at
	}
	st.OOMKilled = in.Container.State.OOMKilled
	limit := in.Container.HostConfig.Memory
	if !st.OOMKilled && limit > 0 && st.Signal == syscall.SIGKILL.String() {
		st.OOMKilled = r.lateOOM(ctx, p.Container, in.Container.State.StartedAt)
	}
	if st.OOMKilled {
		st.MemoryLimit = limit
	}
	return st, nil
}

// removing reports whether a container's state says it is being removed,
// or is dead (what a removal that failed half-way leaves).
func removing(status container.ContainerState) bool {
	return status == container.StateRemoving || status == container.StateDead
}

// oomLate bounds how long a wait looks for the engine's report that the
// OOM killer ended a container which died by SIGKILL under a memory
// limit.
const oomLate = 500 * time.Millisecond

// lateOOM reports whether the engine logged an "oom" event for container
// id since it started (RFC 3339 time, from its state). containerd's shim
// can send a task's exit before its OOM, so the engine may mark the
// container OOMKilled a moment after the wait returned; its event log
// keeps the mark, whichever came first. Only a SIGKILL under a memory
// limit asks, and at most for oomLate.
func (r *Runtime) lateOOM(ctx context.Context, id, startedAt string) bool {
	since, err := time.Parse(time.RFC3339Nano, startedAt)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, oomLate)
	defer cancel()
	ev := r.cli.Events(ctx, client.EventsListOptions{
		Since:   strconv.FormatInt(since.Unix(), 10),
		Filters: make(client.Filters).Add("type", "container").Add("container", id).Add("event", "oom"),
	})
	select {
	case <-ev.Messages:
		return true
	case <-ev.Err:
		return false
	}
}

// exitStatus reads an engine's exit code: 128+N is death by signal N.
func exitStatus(code int64) service.ExitStatus {
	if code > 128 && code <= 128+64 {
		return service.ExitStatus{Known: true, Code: -1, Signal: syscall.Signal(code - 128).String()}
	}
	return service.ExitStatus{Known: true, Code: int(code)}
}

// Stop stops p's container (SIGTERM, SIGKILL after grace, rounded up to
// whole seconds as the engine counts) and removes it. A container already
// gone is no error.
func (r *Runtime) Stop(ctx context.Context, p Proc, grace time.Duration) error {
	if err := r.End(ctx, p, grace); err != nil {
		return err
	}
	if p.Container == "" {
		return nil
	}
	return r.remove(ctx, p.Container)
}

// End stops p's container as Stop does, and keeps it, exited, with its
// output: RestartInPlace can start it again. A container already gone is
// no error.
func (r *Runtime) End(ctx context.Context, p Proc, grace time.Duration) error {
	if p.Container == "" {
		return nil
	}
	secs := int(math.Ceil(grace.Seconds()))
	if _, err := r.cli.ContainerStop(ctx, p.Container, client.ContainerStopOptions{Timeout: &secs}); err != nil && !isNotFound(err) {
		return r.engineError(fmt.Errorf("stop container %s: %w", short(p.Container), err))
	}
	return nil
}

// removeWait bounds the wait for a removal another client began.
const removeWait = time.Minute

// remove removes a container, running or not; one already gone is no
// error. One that another client is removing (docker rm -f by hand, which
// the agent's drift tick may follow at once) is waited for until it is
// gone.
func (r *Runtime) remove(ctx context.Context, id string) error {
	_, err := r.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	switch {
	case err == nil || isNotFound(err):
		return nil
	case isConflict(err): // with Force, only a removal in progress
		return r.waitRemoved(ctx, id)
	}
	return r.engineError(fmt.Errorf("remove container %s: %w", short(id), err))
}

// waitRemoved waits, for at most removeWait, until container id is gone.
func (r *Runtime) waitRemoved(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, removeWait)
	defer cancel()
	res := r.cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionRemoved})
	select {
	case w := <-res.Result:
		if w.Error != nil && w.Error.Message != "" {
			return fmt.Errorf("wait for container %s to be removed: %s", short(id), w.Error.Message)
		}
		return nil
	case err := <-res.Error:
		if isNotFound(err) {
			return nil
		}
		return r.engineError(fmt.Errorf("wait for container %s to be removed (another client removes it): %w", short(id), err))
	}
}

// short is the 12-character id the docker CLI prints.
func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// replicaLabel is the value of LabelReplica.
func replicaLabel(n int) string { return strconv.Itoa(n) }
