package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tend-dev/tend/agent/status"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/manifest"
)

// everyTick is a schedule that fires every d, for fast tests.
type everyTick time.Duration

func (e everyTick) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

func newConfig(t *testing.T, url string) *manifest.AgentConfig {
	dir := t.TempDir()
	c := &manifest.AgentConfig{Device: "cam-017", Source: manifest.SourceConfig{URL: url, Path: "devices/{device}"},
		StateDir: filepath.Join(dir, "state"), Root: filepath.Join(dir, "root"), AllowPaths: []string{"/etc/infer"}}
	c.SetDefaults("")
	require.NoError(t, os.MkdirAll(c.Root, 0o755))
	return c
}

func TestLoopTicksUntilCancelled(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n    - {path: /etc/infer/a, content: a}\n")
	repo.Commit("one")
	c := newConfig(t, repo.Dir())
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	var results []string
	loop := NewLoop(&Reconciler{Config: c, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, LoopOptions{
		Schedule: everyTick(10 * time.Millisecond),
		Jitter:   5 * time.Millisecond,
		OnTick: func(r *Result, err error) {
			results = append(results, r.Outcome(err))
			if len(results) == 3 {
				cancel()
			}
		},
	})
	require.NoError(t, loop.Run(ctx))
	require.Equal(t, []string{status.ResultSuccess, status.ResultNoop, status.ResultNoop}, results)
	require.Contains(t, logs.String(), "msg=reconciled device=cam-017 result=success")
	require.Contains(t, logs.String(), "add=1")
}

func TestLoopKeepsGoingAfterAFailedTick(t *testing.T) {
	c := newConfig(t, filepath.Join(t.TempDir(), "missing-repo"))
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	var errs []error
	loop := NewLoop(&Reconciler{Config: c, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, LoopOptions{
		Schedule: everyTick(time.Millisecond),
		Backoff:  func(int) time.Duration { return 0 },
		OnTick: func(_ *Result, err error) {
			errs = append(errs, err)
			if len(errs) == 2 {
				cancel()
			}
		},
	})
	require.NoError(t, loop.Run(ctx))
	require.Len(t, errs, 2)
	require.Error(t, errs[1])
	require.Contains(t, logs.String(), "reconcile failed; the node keeps its last applied state")
	require.Contains(t, logs.String(), "result=error")
}

func TestTickTimeout(t *testing.T) {
	c := newConfig(t, "/nonexistent")
	var got error
	loop := NewLoop(&Reconciler{Config: c}, LoopOptions{Schedule: everyTick(time.Hour), TickTimeout: time.Nanosecond,
		OnTick: func(_ *Result, err error) { got = err }})
	loop.tick(context.Background(), slog.New(slog.DiscardHandler), false)
	require.True(t, errors.Is(got, context.DeadlineExceeded), "got %v", got)
}

const oneFile = "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n    - {path: /etc/infer/a, content: %s}\n"

// After a failure, scheduled ticks inside the backoff only look at the
// target: the same broken commit is not rendered again, a new commit is
// tried at once, and a manual trigger always runs.
func TestLoopBacksOffButTriesNewCommits(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec: {files: [{path: relative}]}\n")
	repo.Commit("broken")
	c := newConfig(t, repo.Dir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var outcomes []string
	var heldOff atomic.Int64
	loop := NewLoop(&Reconciler{Config: c}, LoopOptions{
		Schedule:  everyTick(5 * time.Millisecond),
		Backoff:   func(int) time.Duration { return time.Hour },
		OnHeldOff: func() { heldOff.Add(1) },
		OnTick: func(r *Result, err error) {
			mu.Lock()
			outcomes = append(outcomes, r.Outcome(err))
			mu.Unlock()
		},
	})
	got := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), outcomes...) }
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	require.Eventually(t, func() bool { return len(got()) == 1 }, 10*time.Second, 5*time.Millisecond)
	// Three scheduled ticks come and are held off: none of them runs.
	require.Eventually(t, func() bool { return heldOff.Load() >= 3 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{status.ResultError}, got(), "ticks in the backoff ran in full")

	require.True(t, loop.Trigger())
	require.Eventually(t, func() bool { return len(got()) == 2 }, 10*time.Second, 5*time.Millisecond)

	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "fixed"))
	repo.Commit("fixed")
	require.Eventually(t, func() bool { g := got(); return len(g) == 3 && g[2] == status.ResultSuccess }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

func TestTriggerCoalesces(t *testing.T) {
	l := NewLoop(nil, LoopOptions{})
	require.True(t, l.Trigger())
	require.False(t, l.Trigger(), "a second trigger while one is queued is coalesced")
}

func TestSuspendPlansButAppliesNothing(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "a"))
	repo.Commit("one")
	c := newConfig(t, repo.Dir())
	require.NoError(t, Suspend(c.StateDir, "maintenance"))
	ok, why := Suspended(c)
	require.True(t, ok)
	require.Contains(t, why, "maintenance")
	var logs bytes.Buffer
	var res *Result
	loop := NewLoop(&Reconciler{Config: c, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, LoopOptions{Schedule: everyTick(time.Hour),
		OnTick: func(r *Result, err error) { require.NoError(t, err); res = r }})
	loop.tick(context.Background(), loop.r.logger(), false)
	require.Equal(t, 1, res.Plan.Summary().Add)
	require.Empty(t, res.Applied)
	require.NoFileExists(t, filepath.Join(c.Root, "etc/infer/a"))
	require.Contains(t, logs.String(), "suspended: changes are planned and reported, not applied")
	require.Contains(t, logs.String(), "suspended=true")

	was, err := Resume(c.StateDir)
	require.NoError(t, err)
	require.True(t, was)
	loop.tick(context.Background(), loop.r.logger(), false)
	require.FileExists(t, filepath.Join(c.Root, "etc/infer/a"))
}

func TestOneAgentPerStateDir(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "a"))
	repo.Commit("one")
	c := newConfig(t, repo.Dir())
	ctx, cancel := context.WithCancel(context.Background())
	ticked := make(chan struct{}, 1)
	first := NewLoop(&Reconciler{Config: c}, LoopOptions{Schedule: everyTick(time.Hour),
		OnTick: func(*Result, error) { ticked <- struct{}{} }})
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	<-ticked
	second := NewLoop(&Reconciler{Config: c}, LoopOptions{Schedule: everyTick(time.Hour)})
	err := second.Run(context.Background())
	var locked *applier.LockedError
	require.ErrorAs(t, err, &locked)
	require.ErrorContains(t, err, "another tend agent (pid")
	cancel()
	require.NoError(t, <-done)
}

// A status port that is taken fails the start, and leaves nothing behind:
// the agent lock is released.
func TestLoopFailsOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	c := newConfig(t, "/nonexistent")
	loop := NewLoop(&Reconciler{Config: c}, LoopOptions{Schedule: everyTick(time.Hour), Listen: ln.Addr().String()})
	err = loop.Run(t.Context())
	require.ErrorContains(t, err, "listen on "+ln.Addr().String())
	require.ErrorContains(t, err, "to off for none")

	unlock, err := applier.LockAgent(c.StateDir)
	require.NoError(t, err, "the agent lock was kept")
	require.NoError(t, unlock())
}

func TestLoopLogsDriftBeforeReverting(t *testing.T) {
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/d.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n    - {path: /etc/infer/a, content: a}\n")
	repo.Commit("one")
	c := newConfig(t, repo.Dir())
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	var loop *Loop
	ticks := 0
	loop = NewLoop(&Reconciler{Config: c, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, LoopOptions{
		Schedule: everyTick(time.Hour),
		OnTick: func(_ *Result, err error) {
			require.NoError(t, err)
			ticks++
			if ticks == 1 {
				require.NoError(t, os.WriteFile(filepath.Join(c.Root, "etc/infer/a"), []byte("edited"), 0o644))
				loop.Trigger()
				return
			}
			cancel()
		},
	})
	require.NoError(t, loop.Run(ctx))
	out := logs.String()
	detected := strings.Index(out, "msg=drift device=cam-017 resource=file/etc/infer/a")
	reverted := strings.Index(out, "msg=applied resource=file/etc/infer/a action=update reason=\"drift: content changed on node\" drift=true")
	require.NotEqual(t, -1, detected, out)
	require.NotEqual(t, -1, reverted, out)
	require.Less(t, detected, reverted, "drift is logged before the apply that reverts it:\n%s", out)
}
