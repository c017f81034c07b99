//go:build linux

package process

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/render"
)

// Kind is the kind of spec this runtime runs: a service with a command.
const Kind = render.KindProcess

func init() {
	service.Register(Kind, func(c service.Config) (service.Runtime, error) {
		return New(c.CgroupParent, c.Log), nil
	})
}

// Spec is what a process instance runs. Its fields are those records have
// always held for a process.
type Spec struct {
	Command    []string          // Command[0]: an absolute path, or a name looked up in PATH
	Env        map[string]string // the whole environment besides PATH (service.DefaultPath unless Env sets PATH); nothing is inherited from tend
	WorkingDir string            // "" = "/"
	User       string            // name or numeric uid; "" = tend's own user
	Group      string            // name or numeric gid; "" = the user's primary group
	Memory     int64             // bytes; 0 = no limit
	CPUMilli   int64             // millicores; 0 = no limit
	LogFile    string            // stdout and stderr are appended here (O_APPEND); the folder is created; "" = discarded
}

// Kind returns Kind.
func (Spec) Kind() string { return Kind }

// Describe is the spec in a manifest's terms.
func (s Spec) Describe() render.Replica {
	return render.Replica{Command: s.Command, Env: s.Env, WorkingDir: s.WorkingDir, User: s.User, Group: s.Group,
		Memory: s.Memory, CPUMilli: s.CPUMilli}
}

// Instance is one process instance: which replica of which service, under
// which invocation ($TEND_INVOCATION_ID), and its Spec's fields.
type Instance struct {
	Service    string
	Replica    int
	Command    []string
	Env        map[string]string
	WorkingDir string
	User       string
	Group      string
	Memory     int64
	CPUMilli   int64
	LogFile    string
	Invocation string
}

// Proc identifies one running process across agent restarts: a pid is
// reused by the kernel, the pair (pid, start time) is not. It is the
// process runtime's handle, as records hold it.
type Proc struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"` // field 22 of /proc/PID/stat, clock ticks since boot
	// Limits is a warning when resources were asked for and could not be
	// applied (no writable cgroup); "" otherwise. Never a silent no-op.
	Limits string `json:"limits,omitempty"`
	// Shim is the instance's log shim (see shimName); nil when its
	// output is discarded, or it was started by a tend without shims.
	Shim *Proc `json:"shim,omitempty"`
}

var (
	_ service.Runtime     = (*Runtime)(nil)
	_ service.Sweeper     = (*Runtime)(nil)
	_ service.Describable = Spec{}
	_ service.Warner      = handle{}
)

// Kind returns Kind.
func (e *Runtime) Kind() string { return Kind }

// Spec is the spec of replica i of s: its command line, environment,
// user, limits, and its log file in stateDir.
func (e *Runtime) Spec(s render.Service, i int, node service.Node) (service.Spec, error) {
	r := s.Replicas[i]
	return Spec{Command: r.Command, Env: r.Env, WorkingDir: r.WorkingDir, User: r.User, Group: r.Group,
		Memory: r.Memory, CPUMilli: r.CPUMilli, LogFile: service.LogFile(node.StateDir, s.Name, i)}, nil
}

// DecodeSpec decodes a Spec from a record.
func (e *Runtime) DecodeSpec(raw json.RawMessage) (service.Spec, error) {
	var s Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts in, whose spec is a Spec, as Run does.
func (e *Runtime) Start(ctx context.Context, in service.Instance) (service.Handle, error) {
	pi, err := instance(in)
	if err != nil {
		return nil, err
	}
	p, err := e.Run(ctx, pi)
	if err != nil {
		return nil, err
	}
	return handle{p, e}, nil
}

// Recover returns the handle of a process from its Proc in a record.
func (e *Runtime) Recover(raw json.RawMessage) (service.Handle, error) {
	var p Proc
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	return handle{p, e}, nil
}

// Orphans returns the processes started for in since then, as
// FindOrphans finds them.
func (e *Runtime) Orphans(_ context.Context, in service.Instance, since time.Time) ([]service.Handle, error) {
	pi, err := instance(in)
	if err != nil {
		return nil, err
	}
	ps, err := e.FindOrphans(pi, since)
	out := make([]service.Handle, len(ps))
	for i, p := range ps {
		out[i] = handle{p, e}
	}
	return out, err
}

// instance is in with its Spec's fields.
func instance(in service.Instance) (Instance, error) {
	s, ok := in.Spec.(Spec)
	if !ok {
		return Instance{}, fmt.Errorf("%s replica %d: the process runtime cannot run a %T", in.Service, in.Replica, in.Spec)
	}
	return Instance{Service: in.Service, Replica: in.Replica, Invocation: in.Invocation, Command: s.Command, Env: s.Env,
		WorkingDir: s.WorkingDir, User: s.User, Group: s.Group, Memory: s.Memory, CPUMilli: s.CPUMilli, LogFile: s.LogFile}, nil
}

// handle is a Proc and the runtime that waits for it and stops it.
type handle struct {
	p  Proc
	rt *Runtime
}

func (h handle) ID() string                                           { return fmt.Sprintf("pid %d@%d", h.p.PID, h.p.StartTime) }
func (h handle) PID() int                                             { return h.p.PID }
func (h handle) Alive() bool                                          { return h.rt.Alive(h.p) }
func (h handle) Wait(ctx context.Context) (service.ExitStatus, error) { return h.rt.Wait(ctx, h.p) }
func (h handle) Stop(ctx context.Context, grace time.Duration) error {
	return h.rt.Stop(ctx, h.p, grace)
}
func (h handle) Warning() string              { return h.p.Limits }
func (h handle) MarshalJSON() ([]byte, error) { return json.Marshal(h.p) }
