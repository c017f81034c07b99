package service_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/process"
	"github.com/tend-dev/tend/internal/testkit/testnode"
)

// The agent's watcher and a `tend apply` (another process, here another
// supervisor on the same stateDir) decide who owns a replica one at a
// time: when the watcher has seen an exit and owns the replica, the apply
// that replaces it waits; once it has, the watcher gives up its restart.
// One instance runs, the one the record names.
func TestServiceOneOwnerAcrossProcesses(t *testing.T) {
	n := newNode(t, true, testAllow)
	n.AllowEmpty = true
	svc := n.service("infer", 1)
	n.apply(svc)
	old := n.pids("infer")[0]

	agentAt := make(chan string, 10)
	release := make(chan struct{})
	n.Sup.SetHook(func(point string) {
		switch point {
		case "exited:owned":
			agentAt <- point
			<-release
		case "exited:gave-up", "exited:restarted", "exited:adopted":
			agentAt <- point
		}
	})
	apply := service.NewSupervisor(n.StateDir, service.RuntimesOf(process.New(testnode.CgroupParent, nil)), nil)
	applyWaits := make(chan struct{}, 1)
	apply.SetHook(func(point string) {
		if point == "lock:busy" {
			select {
			case applyWaits <- struct{}{}:
			default:
			}
		}
	})

	require.NoError(t, syscall.Kill(old, syscall.SIGKILL))
	require.Equal(t, "exited:owned", receive(t, agentAt, "the watcher's hook at the exit"), "the watcher saw the exit and owns the replica")

	in := service.Instance{Service: "infer", Replica: 0, Spec: process.Spec{Command: svc.Command, Env: map[string]string{"INDEX": "0"},
		LogFile: service.LogFile(n.StateDir, "infer", 0)}}
	type started struct {
		proc service.Handle
		err  error
	}
	done := make(chan started, 1)
	go func() {
		p, err := apply.Run(context.Background(), in, service.RunSpec{Hash: "sha256:apply", Policy: "always", Grace: 2 * time.Second})
		done <- started{p, err}
	}()
	// The apply waits for the replica the watcher owns; it must not
	// replace it meanwhile.
	select {
	case <-applyWaits:
	case got := <-done:
		done <- got
		t.Error("the apply replaced the replica while the watcher owned it")
	case <-time.After(waitFor):
		t.Fatalf("the apply neither waited for the replica nor replaced it within %s", waitFor)
	}
	close(release)

	require.Equal(t, "exited:gave-up", receive(t, agentAt, "the watcher's hook once the apply replaced the replica"), "the watcher restarted a replica the apply had replaced")
	got := receive(t, done, "the apply's Run")
	require.NoError(t, got.err)
	recs := n.records("infer")
	require.Len(t, recs, 1)
	require.Equal(t, got.proc.PID(), recs[0].PID, "the record names the apply's instance")
	require.True(t, recs[0].Alive)
	require.ErrorIs(t, syscall.Kill(old, 0), syscall.ESRCH)

	// The agent adopts the apply's instance: no restart pending, and an
	// exit of it is seen and restarted as of its own.
	require.Equal(t, "exited:adopted", receive(t, agentAt, "the watcher adopting the apply's instance"))
	for _, st := range n.instances("infer") {
		require.False(t, st.Pending, "a restart the watcher gave up is still pending")
	}
	require.NoError(t, syscall.Kill(got.proc.PID(), syscall.SIGKILL))
	require.Equal(t, "exited:owned", receive(t, agentAt, "the watcher's hook at the adopted instance's exit"))
	require.Equal(t, "exited:restarted", receive(t, agentAt, "the watcher restarting the adopted instance"), "the agent does not watch the instance the apply started")
}

// An agent that stops while its watcher waits for a replica's lock held by
// another process (a `tend apply` in progress) does not wait for it.
func TestStopDoesNotWaitForAnotherProcess(t *testing.T) {
	n := newNode(t, true, testAllow)
	n.AllowEmpty = true
	n.apply(n.service("infer", 1))
	pid := n.pids("infer")[0]

	other, err := os.OpenFile(filepath.Join(n.StateDir, "services", "infer", "0.lock"), os.O_RDWR, 0)
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, syscall.Flock(int(other.Fd()), syscall.LOCK_EX)) // as the other process would

	busy := make(chan struct{}, 1)
	n.Sup.SetHook(func(point string) {
		if point == "lock:busy" {
			select {
			case busy <- struct{}{}:
			default:
			}
		}
	})
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	receive(t, busy, "the watcher waiting for the lock after the exit")
	stopped := make(chan struct{})
	go func() { n.Sup.Stop(); close(stopped) }()
	receive(t, stopped, "Stop, which waits for the lock another process holds")
}

// receive returns the next value from ch, or fails the test naming what
// did not come when nothing does within waitFor: a regression is a named
// failure, not a suite timeout.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("%s: nothing within %s", what, waitFor)
	}
	var zero T
	return zero
}
