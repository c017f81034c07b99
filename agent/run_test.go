package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tend-dev/tend/internal/testgit"
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
	loop := &Loop{
		Reconciler: &Reconciler{Config: c, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		Schedule:   everyTick(10 * time.Millisecond),
		Jitter:     5 * time.Millisecond,
		OnTick: func(r *Result, err error) {
			results = append(results, r.Outcome(err))
			if len(results) == 3 {
				cancel()
			}
		},
	}
	require.NoError(t, loop.Run(ctx))
	require.Equal(t, []string{ResultSuccess, ResultNoop, ResultNoop}, results)
	require.Contains(t, logs.String(), "msg=reconciled device=cam-017 result=success")
	require.Contains(t, logs.String(), "add=1")
}

func TestLoopKeepsGoingAfterAFailedTick(t *testing.T) {
	c := newConfig(t, filepath.Join(t.TempDir(), "missing-repo"))
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	var errs []error
	loop := &Loop{
		Reconciler: &Reconciler{Config: c, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		Schedule:   everyTick(time.Millisecond),
		OnTick: func(_ *Result, err error) {
			errs = append(errs, err)
			if len(errs) == 2 {
				cancel()
			}
		},
	}
	require.NoError(t, loop.Run(ctx))
	require.Len(t, errs, 2)
	require.Error(t, errs[1])
	require.Contains(t, logs.String(), "reconcile failed; the node keeps its last applied state")
	require.Contains(t, logs.String(), "result=error")
}

func TestTickTimeout(t *testing.T) {
	c := newConfig(t, "/nonexistent")
	loop := &Loop{Reconciler: &Reconciler{Config: c}, Schedule: everyTick(time.Hour), TickTimeout: time.Nanosecond}
	var got error
	loop.OnTick = func(_ *Result, err error) { got = err }
	loop.tick(context.Background(), slog.New(slog.DiscardHandler))
	require.True(t, errors.Is(got, context.DeadlineExceeded), "got %v", got)
}
