package container

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Kind is the kind of spec this runtime runs: a service with an image.
const Kind = render.KindContainer

func init() {
	service.Register(Kind, func(c service.Config) (service.Runtime, error) {
		opts := Options{Log: c.Log}
		if c.Agent != nil {
			opts.Host = c.Agent.DockerHost(os.Getenv)
			opts.Keychain = transport.Keychain(c.Agent.Registries.DockerConfig)
			opts.Confine = &Confinement{Root: c.Agent.Root, AllowPaths: c.Agent.AllowPaths, StateDir: c.Agent.StateDir}
		}
		return New(opts)
	})
}

// Spec is what a container instance runs. Its fields are those records
// have always held for a container. Command, when set, replaces the
// image's entrypoint.
type Spec struct {
	Command    []string
	Env        map[string]string
	WorkingDir string
	User       string
	Group      string
	Memory     int64             // bytes, memory and swap together; 0 = no limit
	CPUMilli   int64             // millicores; 0 = no limit
	Image      string            `json:",omitempty"` // image@sha256:digest (or a tag, pulled as it is)
	Args       []string          `json:",omitempty"` // after the entrypoint
	Mounts     []Mount           `json:",omitempty"` // bind mounts
	Network    string            `json:",omitempty"` // host (the default) | none | bridge
	Devices    []string          `json:",omitempty"` // host device paths, each as HOST[:CONTAINER[:PERMISSIONS]]
	GPUs       string            `json:",omitempty"` // "all" or a count, through the engine's NVIDIA runtime
	Labels     map[string]string `json:",omitempty"` // dev.tend.device, dev.tend.resource, dev.tend.spec
}

// Mount is a host path bound into a container.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Kind returns Kind.
func (Spec) Kind() string { return Kind }

// ImageRef is the image it runs.
func (s Spec) ImageRef() string { return s.Image }

// Describe is the spec in a manifest's terms, as the process runtime
// describes one.
func (s Spec) Describe() render.Replica {
	return render.Replica{Command: s.Command, Env: s.Env, WorkingDir: s.WorkingDir, User: s.User, Group: s.Group,
		Memory: s.Memory, CPUMilli: s.CPUMilli}
}

// Instance is one container instance: which replica of which service,
// under which invocation, and its Spec's fields.
type Instance struct {
	Service    string
	Replica    int
	Invocation string
	Command    []string
	Env        map[string]string
	WorkingDir string
	User       string
	Group      string
	Memory     int64
	CPUMilli   int64
	Image      string
	Args       []string
	Mounts     []Mount
	Network    string
	Devices    []string
	GPUs       string
	Labels     map[string]string
}

// Proc identifies one running container across agent restarts: its id,
// and its main process (pid, start time). It is the runtime's handle, as
// records hold it.
type Proc struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	// Limits holds the engine's warnings about the limits it was asked
	// for; "" otherwise.
	Limits string `json:"limits,omitempty"`
	// Container is the engine's id of the container.
	Container string `json:"container,omitempty"`
	// Started is when tend asked the engine to start the container, this
	// time (zero for a container found by List): its output since then is
	// this instance's (see WriteLogs).
	Started time.Time `json:"started,omitzero"`
}

var (
	_ service.Runtime         = (*Runtime)(nil)
	_ service.Restarter       = (*Runtime)(nil)
	_ service.Ender           = handle{}
	_ service.Preparer        = (*Runtime)(nil)
	_ service.ImageResolving  = (*Runtime)(nil)
	_ service.Finisher        = (*Runtime)(nil)
	_ service.Sweeper         = (*Runtime)(nil)
	_ service.LogWriter       = (*Runtime)(nil)
	_ service.ImageSpec       = Spec{}
	_ service.Describable     = Spec{}
	_ service.ContainerHandle = handle{}
	_ service.Warner          = handle{}
)

// Kind returns Kind.
func (r *Runtime) Kind() string { return Kind }

// Spec is the spec of replica i of s: its image by digest, arguments,
// mounts, network, devices, and the labels tend finds its containers by.
func (r *Runtime) Spec(s render.Service, i int, node service.Node) (service.Spec, error) {
	rep := s.Replicas[i]
	spec := Spec{Command: rep.Command, Env: rep.Env, WorkingDir: rep.WorkingDir, User: rep.User, Group: rep.Group,
		Memory: rep.Memory, CPUMilli: rep.CPUMilli, Image: rep.Image, Args: rep.Args, Network: rep.Network,
		Devices: rep.Devices, GPUs: rep.GPUs,
		Labels: map[string]string{LabelDevice: node.Device, LabelResource: planner.ServiceID(s.Name), LabelSpec: s.Hash}}
	for _, m := range rep.Mounts {
		spec.Mounts = append(spec.Mounts, Mount{Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	return spec, nil
}

// DecodeSpec decodes a Spec from a record.
func (r *Runtime) DecodeSpec(raw json.RawMessage) (service.Spec, error) {
	var s Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts in, whose spec is a Spec, as Run does.
func (r *Runtime) Start(ctx context.Context, in service.Instance) (service.Handle, error) {
	ci, err := instance(in)
	if err != nil {
		return nil, err
	}
	p, err := r.Run(ctx, ci)
	if err != nil {
		return nil, err
	}
	return handle{p, r}, nil
}

// Restart starts the exited container of h again in place, as
// RestartInPlace does.
func (r *Runtime) Restart(ctx context.Context, in service.Instance, h service.Handle) (service.Handle, error) {
	ci, err := instance(in)
	if err != nil {
		return nil, err
	}
	old, ok := h.(handle)
	if !ok {
		return nil, fmt.Errorf("%w: %s replica %d: not a container's handle (%T)", service.ErrRecreate, in.Service, in.Replica, h)
	}
	p, err := r.RestartInPlace(ctx, ci, old.p)
	if err != nil {
		return nil, err
	}
	return handle{p, r}, nil
}

// Recover returns the handle of a container from its Proc in a record.
func (r *Runtime) Recover(raw json.RawMessage) (service.Handle, error) {
	var p Proc
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	return handle{p, r}, nil
}

// Prepare checks the instances of a container service that a plan
// creates or updates (device nodes, mount sources, limits) and pulls its
// image, before any action of the plan runs: an instance that cannot run,
// or an image that cannot be pulled (it does not exist, not for this
// platform, the registry refuses), fails the plan with nothing stopped.
func (r *Runtime) Prepare(ctx context.Context, s render.Service, ins []service.Instance) error {
	for _, in := range ins {
		ci, err := instance(in)
		if err != nil {
			return err
		}
		if err := r.Check(ci); err != nil {
			return fmt.Errorf("replica %d: %w", in.Replica, err)
		}
	}
	if err := r.EnsureImage(ctx, s.Name, s.Replicas[0].Image); err != nil {
		return fmt.Errorf("image %s: %w", s.Image, err)
	}
	return nil
}

// WriteLogs writes the output of the instances spans name, as
// WriteContainerLogs does: the container's output since the instance was
// started, until the next instance was started in the same container (a
// restart in place), or the end.
func (r *Runtime) WriteLogs(ctx context.Context, w io.Writer, name string, spans map[int]service.LogSpan, replica int, follow bool) error {
	out := make(map[int]Span, len(spans))
	for n, s := range spans {
		from, ok := s.From.(handle)
		if !ok {
			out[n] = Span{}
			continue
		}
		sp := Span{Container: from.p.Container, Since: from.p.Started}
		if next, ok := s.Next.(handle); ok && next.p.Container == from.p.Container {
			sp.Until = next.p.Started
		}
		if s.Next != nil {
			sp.Replaced = true
		}
		out[n] = sp
	}
	return r.WriteContainerLogs(ctx, w, name, out, replica, follow)
}

// instance is in with its Spec's fields.
func instance(in service.Instance) (Instance, error) {
	s, ok := in.Spec.(Spec)
	if !ok {
		return Instance{}, fmt.Errorf("%s replica %d: the container runtime cannot run a %T", in.Service, in.Replica, in.Spec)
	}
	return Instance{Service: in.Service, Replica: in.Replica, Invocation: in.Invocation, Command: s.Command, Env: s.Env,
		WorkingDir: s.WorkingDir, User: s.User, Group: s.Group, Memory: s.Memory, CPUMilli: s.CPUMilli, Image: s.Image,
		Args: s.Args, Mounts: s.Mounts, Network: s.Network, Devices: s.Devices, GPUs: s.GPUs, Labels: s.Labels}, nil
}

// handle is a Proc and the runtime that waits for it and stops it.
type handle struct {
	p  Proc
	rt *Runtime
}

func (h handle) ID() string {
	return fmt.Sprintf("container %s pid %d@%d", h.p.Container, h.p.PID, h.p.StartTime)
}
func (h handle) PID() int                                             { return h.p.PID }
func (h handle) ContainerID() string                                  { return h.p.Container }
func (h handle) Alive() bool                                          { return h.rt.Alive(h.p) }
func (h handle) Wait(ctx context.Context) (service.ExitStatus, error) { return h.rt.Wait(ctx, h.p) }
func (h handle) Stop(ctx context.Context, grace time.Duration) error {
	return h.rt.Stop(ctx, h.p, grace)
}
func (h handle) End(ctx context.Context, grace time.Duration) error {
	return h.rt.End(ctx, h.p, grace)
}
func (h handle) Warning() string              { return h.p.Limits }
func (h handle) MarshalJSON() ([]byte, error) { return json.Marshal(h.p) }
