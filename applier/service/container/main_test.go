package container_test

import (
	"context"
	"os"
	"testing"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/container"
	"github.com/tend-dev/tend/internal/testkit/testdocker"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

func TestMain(m *testing.M) { os.Exit(testdocker.Main(m)) }

// env is a runtime on the package's private engine, a raw client to check
// what the engine holds, and the svc image in a test registry.
type env struct {
	rt  *container.Runtime
	cli *client.Client
	img testdocker.Image
	reg *testoci.Registry
}

func setup(t testing.TB) env {
	t.Helper()
	host := testdocker.Host(t)
	reg := testoci.Start(t)
	img := testdocker.PushProgram(t, reg.Host, "test/svc", testdocker.SvcDir())
	rt, err := container.New(container.Options{Host: host})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })
	cli, err := client.New(client.WithHost(host))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return env{rt: rt, cli: cli, img: img, reg: reg}
}

// instance is replica 0 of service svc on device, running the svc image.
func (e env) instance(device, svc string, args ...string) container.Instance {
	return container.Instance{
		Service: svc,
		Image:   e.img.Ref,
		Args:    args,
		Labels: map[string]string{
			container.LabelDevice:   device,
			container.LabelResource: "service/" + svc,
			container.LabelSpec:     "spec-" + svc,
		},
	}
}

// start starts in and stops its container when the test ends.
func (e env) start(t testing.TB, in container.Instance) container.Proc {
	t.Helper()
	p, err := e.rt.Run(context.Background(), in)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.rt.Stop(context.Background(), p, 0) })
	return p
}

// inspect is the engine's view of a container.
func (e env) inspect(t testing.TB, id string) client.ContainerInspectResult {
	t.Helper()
	res, err := e.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	require.NoError(t, err)
	return res
}

// waitAsync runs Wait in the background, as the supervisor does.
func (e env) waitAsync(p container.Proc) <-chan waitResult {
	ch := make(chan waitResult, 1)
	go func() {
		st, err := e.rt.Wait(context.Background(), p)
		ch <- waitResult{st, err}
	}()
	return ch
}

type waitResult struct {
	st  service.ExitStatus
	err error
}
