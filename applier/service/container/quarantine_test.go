package container_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/planner"
)

// A container image whose tag moved to an image that fails its start is
// rolled back and quarantined by its digest (the commit did not move):
// the next ticks keep the container that runs, and say why; tend retry's
// unquarantine has it tried once more; a fixed image under the tag is
// taken.
func TestAgentQuarantinesRolledBackImage(t *testing.T) {
	n := newNode(t)
	// The probe passes (the test listens); a start that exits fails
	// within startupGrace.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n      health: {tcp: \""+l.Addr().String()+"\", startupGrace: 2s}\n")
	_, err = n.apply(t)
	require.NoError(t, err)
	good := n.containers(t)
	require.Len(t, good, 1)

	bad := n.moveTagTo(t, "BUILD=bad", "-exit", "3")
	_, err = n.apply(t)
	var rb *applier.RollbackError
	require.True(t, errors.As(err, &rb), "%v", err)
	key := applier.ReleaseKey("service/web", bad)
	q, err := applier.LoadQuarantine(n.c.StateDir)
	require.NoError(t, err)
	require.Len(t, q, 1, "the commit did not move: only the image's digest is quarantined")
	require.Equal(t, key, q[key].Revision)
	require.Equal(t, "latest", q[key].Tag)
	require.Contains(t, q[key].Reason, "service/web did not become healthy")
	running := n.containers(t)
	require.Len(t, running, 1)
	in, err := n.cli.ContainerInspect(context.Background(), running[0].ID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.Equal(t, n.img.Ref, in.Container.Config.Image, "the last good image runs again")

	short := planner.ShortDigest(bad)
	for i := range 3 {
		res, err := n.apply(t)
		require.NoError(t, err, "tick %d", i)
		require.True(t, res.Plan.Empty(), "tick %d: %v", i, res.Plan.Actions)
		require.ErrorContains(t, res.Quarantined(), "service/web image "+n.img.Tag+" ("+short+") was rolled back on this node at ")
		require.ErrorContains(t, res.Quarantined(), "run tend retry service/web@"+short)
		require.Equal(t, running[0].ID, n.containers(t)[0].ID, "tick %d: the container was replaced", i)
	}

	// retry: tried once more, rolled back and quarantined again.
	cleared, err := applier.Unquarantine(n.c.StateDir, "service/web@"+short)
	require.NoError(t, err)
	require.Len(t, cleared, 1)
	_, err = n.apply(t)
	require.True(t, errors.As(err, &rb), "%v", err)
	q, err = applier.LoadQuarantine(n.c.StateDir)
	require.NoError(t, err)
	require.Contains(t, q, key)

	fixed := n.moveTagTo(t, "BUILD=fixed")
	res, err := n.apply(t)
	require.NoError(t, err)
	require.NoError(t, res.Quarantined(), "the tag names a new image")
	running = n.containers(t)
	require.Len(t, running, 1)
	in, err = n.cli.ContainerInspect(context.Background(), running[0].ID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.Contains(t, in.Container.Config.Image, fixed)
}
