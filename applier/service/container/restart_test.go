package container_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/container"
)

// RestartInPlace starts the container that exited again: the same id and
// name, a new main process, the output of each run told apart by when
// tend started it. What cannot be started in place (another spec, other
// mounts, a container gone or running) is refused with ErrRecreate, and
// nothing is started.
func TestRestartInPlace(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	dir, other := t.TempDir(), t.TempDir()
	in := e.instance("edge-1", "web", "-id")
	in.Mounts = []container.Mount{{Source: dir, Target: "/data", ReadOnly: true}}
	p := e.start(t, in)
	runIDs := func(since, until time.Time) []string {
		var b bytes.Buffer
		require.NoError(t, e.rt.LogsBetween(ctx, &b, p.Container, since, until, false))
		var ids []string
		for l := range strings.Lines(b.String()) {
			if id, ok := strings.CutPrefix(strings.TrimSpace(l), "svc run "); ok {
				ids = append(ids, id)
			}
		}
		return ids
	}
	var first []string
	require.Eventually(t, func() bool { first = runIDs(p.Started, time.Time{}); return len(first) == 1 }, 30*time.Second, 10*time.Millisecond)

	require.NoError(t, e.rt.End(ctx, p, 0))
	require.Equal(t, "exited", string(e.inspect(t, p.Container).Container.State.Status), "End keeps the container")
	p2, err := e.rt.RestartInPlace(ctx, in, p)
	require.NoError(t, err)
	require.Equal(t, p.Container, p2.Container, "the same container")
	require.NotEqual(t, p.PID, p2.PID)
	require.True(t, p2.Started.After(p.Started))
	require.True(t, e.rt.Alive(p2))
	require.False(t, e.rt.Alive(p), "the instance that exited is not the one that runs")
	var second []string
	require.Eventually(t, func() bool { second = runIDs(p2.Started, time.Time{}); return len(second) == 1 }, 30*time.Second, 10*time.Millisecond)
	require.NotEqual(t, first, second)
	require.Equal(t, first, runIDs(p.Started, p2.Started), "the first run's output, and only it")
	require.Len(t, runIDs(time.Time{}, time.Time{}), 2, "the engine keeps both runs' output")

	require.NoError(t, e.rt.End(ctx, p2, 0))
	for _, tc := range []struct {
		name, want string
		change     func(in *container.Instance)
	}{
		{"other arguments", "runs another command", func(in *container.Instance) { in.Args = []string{"-say", "new"} }},
		{"another mount source", "runs another mounts", func(in *container.Instance) { in.Mounts[0].Source = other }},
		{"another memory limit", "runs another resource limits", func(in *container.Instance) { in.Memory = 64 << 20 }},
		{"another spec label", "runs another spec (label dev.tend.spec)", func(in *container.Instance) {
			in.Labels = map[string]string{container.LabelDevice: "edge-1", container.LabelResource: "service/web", container.LabelSpec: "spec-2"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := in
			changed.Mounts = append([]container.Mount(nil), in.Mounts...)
			tc.change(&changed)
			_, err := e.rt.RestartInPlace(ctx, changed, p2)
			require.ErrorIs(t, err, service.ErrRecreate)
			require.ErrorContains(t, err, "service web replica 0: container "+p.Container[:12]+" "+tc.want)
			require.Equal(t, "exited", string(e.inspect(t, p.Container).Container.State.Status), "nothing started")
		})
	}

	t.Run("running", func(t *testing.T) {
		running := e.start(t, e.instance("edge-1", "other"))
		_, err := e.rt.RestartInPlace(ctx, e.instance("edge-1", "other"), running)
		require.ErrorIs(t, err, service.ErrRecreate)
		require.ErrorContains(t, err, "is running, not exited")
	})
	t.Run("gone", func(t *testing.T) {
		_, err := e.cli.ContainerRemove(ctx, p.Container, client.ContainerRemoveOptions{Force: true})
		require.NoError(t, err)
		_, err = e.rt.RestartInPlace(ctx, in, p2)
		require.ErrorIs(t, err, service.ErrRecreate)
		require.ErrorContains(t, err, "container "+p.Container[:12]+" is gone")
	})
}
