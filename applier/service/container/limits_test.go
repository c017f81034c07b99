package container_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
	tendcontainer "github.com/tend-dev/tend/applier/service/container"
	"github.com/tend-dev/tend/internal/testkit/testdocker"
)

// TestLimitDriftUpdatedInPlace changes a running container's limits with
// the engine's update call, as docker update --memory 256m --cpus 2 does:
// LimitDrift names each change once the engine reports the update, and
// RestoreLimits puts them back on the same container. A container found
// as declared is not asked about again until the engine reports an update.
func TestLimitDriftUpdatedInPlace(t *testing.T) {
	e := setup(t)
	proxy, calls := countingEngine(t, strings.TrimPrefix(testdocker.Host(t), "unix://"))
	rt, err := tendcontainer.New(tendcontainer.Options{Host: "unix://" + proxy})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	ctx := context.Background()
	ci := e.instance("edge-1", "limits")
	in := service.Instance{Service: "limits", Spec: tendcontainer.Spec{Image: ci.Image, Labels: ci.Labels, Memory: 64 << 20, CPUMilli: 500}}
	h, err := rt.Start(ctx, in)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Stop(context.Background(), 0) })
	id := h.(service.ContainerHandle).ContainerID()

	require.Empty(t, rt.LimitDrift(ctx, in, h), "as started")
	before := calls.Load()
	require.Empty(t, rt.LimitDrift(ctx, in, h))
	require.Equal(t, before, calls.Load(), "a container found as declared, and not updated since, costs no engine call")

	_, err = e.cli.ContainerUpdate(ctx, id, client.ContainerUpdateOptions{
		Resources:     &container.Resources{Memory: 256 << 20, MemorySwap: 256 << 20, NanoCPUs: 2_000_000_000},
		RestartPolicy: &container.RestartPolicy{Name: container.RestartPolicyAlways},
	})
	require.NoError(t, err)
	var drift []string
	require.Eventually(t, func() bool {
		drift = rt.LimitDrift(ctx, in, h)
		return len(drift) > 0
	}, 10*time.Second, 20*time.Millisecond, "the update was not seen")
	require.Equal(t, []string{
		"memory limit 256Mi on engine, 64Mi declared (updated in place)",
		"cpu limit 2000m on engine, 500m declared (updated in place)",
		"restart policy always on engine, no declared: tend restarts it (updated in place)",
	}, drift)

	pid := h.PID()
	require.NoError(t, rt.RestoreLimits(ctx, in, h))
	host := e.inspect(t, id).Container.HostConfig
	require.Equal(t, int64(64<<20), host.Memory)
	require.Equal(t, int64(500_000_000), host.NanoCPUs)
	require.Equal(t, container.RestartPolicyDisabled, host.RestartPolicy.Name)
	require.Empty(t, rt.LimitDrift(ctx, in, h))
	require.True(t, h.Alive())
	require.Equal(t, pid, h.PID(), "the same container and process")

	// A limit where none is declared cannot be removed in place.
	free := service.Instance{Service: "limits", Spec: tendcontainer.Spec{Image: ci.Image, Labels: ci.Labels, Memory: 64 << 20}}
	require.Equal(t, []string{"cpu limit 500m on engine, none declared (container recreated: the engine cannot remove a limit in place)"},
		rt.LimitDrift(ctx, free, h))
	require.ErrorContains(t, rt.RestoreLimits(ctx, free, h), "cannot be removed in place")
}
