package container_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tend-dev/tend/applier/service/container"
	"github.com/tend-dev/tend/internal/testkit/testdocker"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// The runtime on Podman's Docker-compatible API, the second engine: the
// client negotiates its version, a container is created from the test
// registry by digest with tend's labels, listed, its output read, its main
// process killed and seen through Wait, and it is stopped and removed.
func TestPodman(t *testing.T) {
	reg := testoci.Start(t)
	img := testdocker.PushProgram(t, reg.Host, "test/svc", testdocker.SvcDir())
	host := testdocker.Podman(t, reg.Host)
	rt, err := container.New(container.Options{Host: host})
	require.NoError(t, err)
	defer rt.Close()
	ctx := context.Background()
	v, err := rt.APIVersion(ctx)
	require.NoError(t, err)
	t.Logf("Podman: API %s", v)

	e := env{rt: rt, img: img, reg: reg}
	in := e.instance("podman-dev", "web", "-say", "on podman")
	p, err := rt.Run(ctx, in)
	if err != nil && strings.Contains(err.Error(), "error setting rlimit") {
		// Podman's runc sets the container's process limits, which a
		// sandboxed machine (this one, a CI runner) may refuse even at
		// their current values; negotiation above was checked.
		t.Skipf("Podman cannot start containers on this machine: %v", err)
	}
	require.NoError(t, err)
	defer func() { _ = rt.Stop(ctx, p, 0) }()
	require.True(t, rt.Alive(p))
	require.NotZero(t, p.PID)

	list, err := rt.List(ctx, "podman-dev")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, p.Container, list[0].ID)
	require.Equal(t, "service/web", list[0].Labels[container.LabelResource])

	var out bytes.Buffer
	require.Eventually(t, func() bool {
		out.Reset()
		return rt.Logs(ctx, &out, p.Container, 0, false) == nil && bytes.Contains(out.Bytes(), []byte("on podman"))
	}, time.Minute, 50*time.Millisecond, "logs: %s", &out)

	done := e.waitAsync(p)
	require.NoError(t, unix.Kill(p.PID, unix.SIGKILL))
	res := <-done
	require.NoError(t, res.err)
	require.True(t, res.st.Failed(), "%s", res.st)

	require.NoError(t, rt.Stop(ctx, p, 0))
	list, err = rt.List(ctx, "podman-dev")
	require.NoError(t, err)
	require.Empty(t, list)
}
