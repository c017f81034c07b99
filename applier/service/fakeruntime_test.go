package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// fakeKind is the kind of the fake runtime.
const fakeKind = "fake"

// fakeRuntime is a FAKE runtime, for tests only: its "instances" are
// entries in a table, running until stopped or told to exit. It exists to
// prove the plugin seam: a runtime the core has never heard of, in a
// package of its own (here, a test file), registered with one line, runs
// services through the real Driver and Supervisor (start, liveness, exit
// and restart, adoption by a new supervisor, stop) with no change to the
// core. It implements service.Runtime and no optional interface.
type fakeRuntime struct {
	mu     sync.Mutex
	next   int
	starts int
	procs  map[string]*fakeProc // by id
}

type fakeProc struct {
	in   service.Instance
	done chan struct{} // closed when it exits
	code int
}

// fakeSpec is what a fake instance runs.
type fakeSpec struct {
	Say string `json:"say"`
}

func (fakeSpec) Kind() string { return fakeKind }

// fakeHandle is the fake's handle: the id of its table entry.
type fakeHandle struct {
	Fake string `json:"fake"`
	rt   *fakeRuntime
}

var fake = &fakeRuntime{procs: map[string]*fakeProc{}}

// The one line a runtime needs to be known.
func init() {
	service.Register(fakeKind, func(service.Config) (service.Runtime, error) { return fake, nil })
}

func (f *fakeRuntime) Kind() string { return fakeKind }

func (f *fakeRuntime) Spec(s render.Service, i int, _ service.Node) (service.Spec, error) {
	return fakeSpec{Say: s.Replicas[i].Command[0]}, nil
}

func (f *fakeRuntime) DecodeSpec(raw json.RawMessage) (service.Spec, error) {
	var s fakeSpec
	err := json.Unmarshal(raw, &s)
	return s, err
}

func (f *fakeRuntime) Start(_ context.Context, in service.Instance) (service.Handle, error) {
	if _, ok := in.Spec.(fakeSpec); !ok {
		return nil, fmt.Errorf("fake runtime cannot run a %T", in.Spec)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.starts++
	id := "fake-" + strconv.Itoa(f.next)
	f.procs[id] = &fakeProc{in: in, done: make(chan struct{})}
	return fakeHandle{Fake: id, rt: f}, nil
}

func (f *fakeRuntime) Recover(raw json.RawMessage) (service.Handle, error) {
	h := fakeHandle{rt: f}
	err := json.Unmarshal(raw, &h)
	return h, err
}

// exit makes the instance id exit with code.
func (f *fakeRuntime) exit(id string, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.procs[id]; p != nil {
		p.code = code
		close(p.done)
		delete(f.procs, id)
	}
}

func (f *fakeRuntime) startCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts
}

// running returns the ids of the running instances.
func (f *fakeRuntime) running() map[string]service.Instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]service.Instance{}
	for id, p := range f.procs {
		out[id] = p.in
	}
	return out
}

func (h fakeHandle) proc() *fakeProc {
	h.rt.mu.Lock()
	defer h.rt.mu.Unlock()
	return h.rt.procs[h.Fake]
}

func (h fakeHandle) ID() string  { return h.Fake }
func (h fakeHandle) PID() int    { return 0 }
func (h fakeHandle) Alive() bool { return h.proc() != nil }

func (h fakeHandle) Wait(ctx context.Context) (service.ExitStatus, error) {
	p := h.proc()
	if p == nil {
		return service.ExitStatus{}, nil
	}
	select {
	case <-p.done:
		return service.ExitStatus{Known: true, Code: p.code}, nil
	case <-ctx.Done():
		return service.ExitStatus{}, ctx.Err()
	}
}

func (h fakeHandle) Stop(context.Context, time.Duration) error {
	h.rt.exit(h.Fake, -1)
	return nil
}

func TestFakeRuntimeRunsThroughTheCore(t *testing.T) {
	service.SetStartupGrace(t, 5*time.Second)
	ctx := context.Background()
	dir := t.TempDir()
	rts := service.Open(service.Config{})
	require.Contains(t, service.Kinds(), fakeKind, "registered from its own package")
	rt, err := rts.Get(fakeKind)
	require.NoError(t, err)
	require.Same(t, fake, rt)

	sup := service.NewSupervisor(dir, rts, nil)
	restarted := make(chan string, 4)
	sup.OnRestart(func(s string) { restarted <- s })
	require.NoError(t, sup.Start(ctx))
	d := service.NewDriver(dir, sup, service.DriverOptions{Device: "edge-1"})
	spec := render.Service{Name: "echo", Kind: fakeKind, Hash: "sha256:echo", Restart: "always",
		Replicas: []render.Replica{{Command: []string{"hello"}}, {Command: []string{"hello"}}}}

	// Start: both replicas run on the fake, each with the spec it made.
	require.NoError(t, d.Apply(ctx, planner.Action{Type: planner.Create, Resource: "service/echo"}, spec))
	running := fake.running()
	require.Len(t, running, 2)
	for _, in := range running {
		require.Equal(t, fakeSpec{Say: "hello"}, in.Spec)
		require.NotEmpty(t, in.Invocation)
	}
	st, err := d.Observe(ctx, "service/echo", spec)
	require.NoError(t, err)
	require.Contains(t, st.Fields, planner.Field{Name: planner.FieldReplicas, Value: "2"}, "both replicas are alive, as the fake's handles say")

	// Liveness: an exit the fake reports is seen and restarted.
	insts, err := sup.Instances("echo")
	require.NoError(t, err)
	var first string
	for id, in := range running {
		if in.Replica == 0 {
			first = id
		}
	}
	fake.exit(first, 3)
	select {
	case s := <-restarted:
		require.Equal(t, "echo", s)
	case <-time.After(waitFor):
		t.Fatal("the exit of a fake instance was not seen")
	}
	after, err := sup.Instances("echo")
	require.NoError(t, err)
	require.Equal(t, "exit code 3", after[0].LastExit)
	require.Equal(t, 1, after[0].Restarts)
	require.True(t, after[0].Alive)
	require.Equal(t, insts[1], after[1], "the other replica is untouched")
	sup.Stop()

	// Adoption: a new supervisor (an agent restart) recovers the
	// recorded handles and starts nothing.
	starts := fake.startCount()
	sup = service.NewSupervisor(dir, service.Open(service.Config{}), nil)
	require.NoError(t, sup.Start(ctx))
	defer sup.Stop()
	d = service.NewDriver(dir, sup, service.DriverOptions{Device: "edge-1"})
	adopted, err := sup.Instances("echo")
	require.NoError(t, err)
	require.Len(t, adopted, 2)
	for _, in := range adopted {
		require.True(t, in.Alive, "replica %d adopted", in.Replica)
	}
	require.NoError(t, d.Apply(ctx, planner.Action{Type: planner.Update, Resource: "service/echo"}, spec))
	require.Equal(t, starts, fake.startCount(), "an adopted instance as declared is not started again")

	// Stop: deleting the service stops its instances on the fake.
	require.NoError(t, d.Apply(ctx, planner.Action{Type: planner.Delete, Resource: "service/echo"}, nil))
	require.Empty(t, fake.running())
}
