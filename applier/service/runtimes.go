package service

import (
	"context"
	"time"
)

// Runtimes runs each instance on the runtime of its kind: an instance with
// an Image (a Proc with a Container) on Container, any other on Process.
// Container may be nil on a node that runs no containers: an instance
// with an image is then refused before anything runs.
type Runtimes struct {
	Process   Runtime
	Container Runtime
}

var (
	_ Runtime = Runtimes{}
	_ Sweeper = Runtimes{}
)

func (r Runtimes) of(container bool) (Runtime, error) {
	if !container {
		return r.Process, nil
	}
	if r.Container == nil {
		return nil, Invalidf("no container runtime on this node: tend was started without one")
	}
	return r.Container, nil
}

// Start starts in on its runtime.
func (r Runtimes) Start(ctx context.Context, in Instance) (Proc, error) {
	rt, err := r.of(in.Image != "")
	if err != nil {
		return Proc{}, err
	}
	return rt.Start(ctx, in)
}

// Alive asks p's runtime.
func (r Runtimes) Alive(p Proc) bool {
	rt, err := r.of(p.Container != "")
	return err == nil && rt.Alive(p)
}

// Wait waits on p's runtime.
func (r Runtimes) Wait(ctx context.Context, p Proc) (ExitStatus, error) {
	rt, err := r.of(p.Container != "")
	if err != nil {
		return ExitStatus{}, err
	}
	return rt.Wait(ctx, p)
}

// Stop stops p on its runtime.
func (r Runtimes) Stop(ctx context.Context, p Proc, grace time.Duration) error {
	rt, err := r.of(p.Container != "")
	if err != nil {
		return err
	}
	return rt.Stop(ctx, p, grace)
}

// Orphans asks in's runtime, when it can find what it started.
func (r Runtimes) Orphans(in Instance, since time.Time) ([]Proc, error) {
	rt, err := r.of(in.Image != "")
	if err != nil {
		return nil, nil
	}
	if s, ok := rt.(Sweeper); ok {
		return s.Orphans(in, since)
	}
	return nil, nil
}

// Puller is a Runtime that fetches an image before an instance needs it,
// so that an image that cannot be pulled fails a plan before anything is
// stopped.
type Puller interface {
	// EnsureImage pulls image for service unless the engine has it.
	EnsureImage(ctx context.Context, service, image string) error
}

// EnsureImage pulls image, for service, through the container runtime,
// when it pulls.
func (r Runtimes) EnsureImage(ctx context.Context, service, image string) error {
	rt, err := r.of(true)
	if err != nil {
		return err
	}
	if p, ok := rt.(Puller); ok {
		return p.EnsureImage(ctx, service, image)
	}
	return nil
}
