package container_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tend-dev/tend/applier/service"
	tc "github.com/tend-dev/tend/applier/service/container"
)

// A started container is alive; when its main process dies, Wait returns
// how it ended and it is no longer alive.
func TestStartKillWait(t *testing.T) {
	e := setup(t)
	for _, tt := range []struct {
		name   string
		memory int64
		kill   func(t *testing.T, p tc.Proc)
		want   service.ExitStatus
	}{
		{"SIGKILL to the main pid", 0, func(t *testing.T, p tc.Proc) {
			require.NoError(t, unix.Kill(p.PID, unix.SIGKILL))
		}, service.ExitStatus{Known: true, Code: -1, Signal: "killed"}},
		{"SIGTERM through the engine", 0, func(t *testing.T, p tc.Proc) {
			_, err := e.cli.ContainerKill(context.Background(), p.Container, client.ContainerKillOptions{Signal: "SIGTERM"})
			require.NoError(t, err)
		}, service.ExitStatus{Known: true, Code: 0}},
		{"SIGKILL through the engine", 0, func(t *testing.T, p tc.Proc) {
			_, err := e.cli.ContainerKill(context.Background(), p.Container, client.ContainerKillOptions{Signal: "SIGKILL"})
			require.NoError(t, err)
		}, service.ExitStatus{Known: true, Code: -1, Signal: "killed"}},
		// A SIGKILL under a memory limit looks for a late OOM report
		// from the engine, and finds none.
		{"SIGKILL under a memory limit, not out of memory", 64 << 20, func(t *testing.T, p tc.Proc) {
			require.NoError(t, unix.Kill(p.PID, unix.SIGKILL))
		}, service.ExitStatus{Known: true, Code: -1, Signal: "killed"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := e.instance("edge-1", "web")
			in.Memory = tt.memory
			p := e.start(t, in)
			require.NotEmpty(t, p.Container)
			require.Positive(t, p.PID)
			require.NotZero(t, p.StartTime, "start time of the container's main process from /proc")
			require.True(t, e.rt.Alive(p))
			require.Equal(t, p.PID, e.inspect(t, p.Container).Container.State.Pid)

			done := e.waitAsync(p)
			tt.kill(t, p)
			res := <-done
			require.NoError(t, res.err)
			require.Equal(t, tt.want, exitOnly(t, res.st))
			require.False(t, e.rt.Alive(p))
		})
	}
}

// Args follow the image's entrypoint; the exit code comes back.
func TestExitCode(t *testing.T) {
	e := setup(t)
	p := e.start(t, e.instance("edge-1", "job", "-exit", "3"))
	st, err := e.rt.Wait(context.Background(), p)
	require.NoError(t, err)
	require.Equal(t, service.ExitStatus{Known: true, Code: 3}, exitOnly(t, st))
	require.True(t, st.Failed())
}

// exitOnly is st without its time, which it must have: the engine's.
func exitOnly(t *testing.T, st service.ExitStatus) service.ExitStatus {
	t.Helper()
	require.False(t, st.At.IsZero(), "the engine says when it ended")
	require.False(t, st.At.After(time.Now()), "ended %s, in the future", st.At)
	st.At = time.Time{}
	return st
}

// Stop ends the container and removes it; stopping it again is no error.
func TestStopRemoves(t *testing.T) {
	e := setup(t)
	p := e.start(t, e.instance("edge-1", "web"))
	done := e.waitAsync(p)
	require.NoError(t, e.rt.Stop(context.Background(), p, 10*time.Second))
	_, err := e.cli.ContainerInspect(context.Background(), p.Container, client.ContainerInspectOptions{})
	require.Error(t, err, "the container is removed")
	res := <-done
	require.NoError(t, res.err)
	require.False(t, e.rt.Alive(p), "gone, once its wait has returned (a wait under way counts as alive)")
	// svc exits 0 on SIGTERM; Wait may also find the container removed
	// (the supervisor knows it stopped it).
	st := res.st
	st.At = time.Time{} // when the engine saw it stop, if it still could
	require.Contains(t, []service.ExitStatus{{Known: true}, {Known: true, Removed: true}, {Removed: true}}, st)
	require.NoError(t, e.rt.Stop(context.Background(), p, time.Second), "already gone")
}

// A container removed through the engine while it runs (docker rm -f)
// is not an exit like another: Wait says it was removed.
func TestWaitSeesRemoval(t *testing.T) {
	e := setup(t)
	p := e.start(t, e.instance("edge-1", "web"))
	done := e.waitAsync(p)
	_, err := e.cli.ContainerRemove(context.Background(), p.Container, client.ContainerRemoveOptions{Force: true})
	require.NoError(t, err)
	res := <-done
	require.NoError(t, res.err)
	require.True(t, res.st.Removed, "%+v", res.st)
	require.Equal(t, service.RemovedExit, res.st.String())
	require.False(t, e.rt.Alive(p))
}

// The container gets the instance's limits, environment, labels, name,
// host network and restart policy "no"; mounts and devices are bound.
func TestCreateSpec(t *testing.T) {
	e := setup(t)
	dir := t.TempDir()
	in := e.instance("edge-1", "web")
	in.Replica = 2
	in.Memory = 64 << 20
	in.CPUMilli = 500
	in.Env = map[string]string{"LOG_LEVEL": "info"}
	in.Invocation = "inv-1"
	in.Mounts = []tc.Mount{{Source: dir, Target: "/models/m", ReadOnly: true}}
	in.Devices = []string{"/dev/null:/dev/xnull"}
	p := e.start(t, in)

	c := e.inspect(t, p.Container).Container
	require.Equal(t, "/tend-edge-1-web-2", c.Name)
	require.Equal(t, int64(64<<20), c.HostConfig.Memory)
	require.Equal(t, int64(64<<20), c.HostConfig.MemorySwap)
	require.Equal(t, int64(500_000_000), c.HostConfig.NanoCPUs)
	require.Equal(t, container.NetworkMode("host"), c.HostConfig.NetworkMode)
	require.Equal(t, container.RestartPolicyDisabled, c.HostConfig.RestartPolicy.Name)
	require.Equal(t, "json-file", c.HostConfig.LogConfig.Type)
	require.Equal(t, map[string]string{
		tc.LabelDevice: "edge-1", tc.LabelResource: "service/web", tc.LabelSpec: "spec-web",
		tc.LabelReplica: "2", tc.LabelInvocation: "inv-1",
	}, c.Config.Labels)
	require.Contains(t, c.Config.Env, "LOG_LEVEL=info")
	require.Contains(t, c.Config.Env, service.InvocationEnv+"=inv-1")
	require.Equal(t, e.img.Ref, c.Config.Image)
	require.Len(t, c.Mounts, 1)
	require.Equal(t, dir, c.Mounts[0].Source)
	require.Equal(t, "/models/m", c.Mounts[0].Destination)
	require.False(t, c.Mounts[0].RW)
	require.Equal(t, []container.DeviceMapping{{PathOnHost: "/dev/null", PathInContainer: "/dev/xnull", CgroupPermissions: "rwm"}}, c.HostConfig.Devices)
}

// A container that ends past its memory limit is reported as killed out of
// memory, with the limit.
func TestOOMKilled(t *testing.T) {
	e := setup(t)
	in := e.instance("edge-1", "hog", "-alloc", "256")
	in.Memory = 32 << 20
	// svc may be killed before Start inspects it (PID 0): Wait still
	// finds its status.
	p := e.start(t, in)
	st, err := e.rt.Wait(context.Background(), p)
	require.NoError(t, err)
	require.True(t, st.OOMKilled, "status %s", st)
	require.Equal(t, int64(32<<20), st.MemoryLimit)
	require.Equal(t, "killed by signal killed (out of memory: limit 32Mi)", st.String())
}

// A second start of the same replica replaces the exited container of the
// first (same name).
func TestRestartReplacesExited(t *testing.T) {
	e := setup(t)
	in := e.instance("edge-1", "web")
	p1 := e.start(t, in)
	done := e.waitAsync(p1)
	require.NoError(t, unix.Kill(p1.PID, unix.SIGKILL))
	require.NoError(t, (<-done).err)
	p2 := e.start(t, in)
	require.NotEqual(t, p1.Container, p2.Container)
	require.True(t, e.rt.Alive(p2))
	_, err := e.cli.ContainerInspect(context.Background(), p1.Container, client.ContainerInspectOptions{})
	require.Error(t, err, "the exited container was removed")
}

// List finds tend's containers for the device, running or exited, and no
// other: not another device's, not one without tend's labels.
func TestListOnlyTends(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	a := e.start(t, e.instance("dev-a", "web"))
	aJob := e.start(t, e.instance("dev-a", "job", "-exit", "0"))
	_, err := e.rt.Wait(ctx, aJob)
	require.NoError(t, err)
	e.start(t, e.instance("dev-b", "web"))
	for _, labels := range []map[string]string{
		nil,                       // someone else's container
		{tc.LabelDevice: "dev-a"}, // labelled by hand, not created by tend
	} {
		c, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config:     &container.Config{Image: e.img.Ref, Labels: labels},
			HostConfig: &container.HostConfig{NetworkMode: "none"},
		})
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = e.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}) })
	}

	got, err := e.rt.List(ctx, "dev-a")
	require.NoError(t, err)
	ids := map[string]string{}
	for _, c := range got {
		ids[c.ID] = c.State
		require.Equal(t, "dev-a", c.Labels[tc.LabelDevice])
		require.Equal(t, e.img.Ref, c.Image)
		require.True(t, strings.HasPrefix(c.Name, "tend-dev-a-"), c.Name)
	}
	require.Equal(t, map[string]string{a.Container: "running", aJob.Container: "exited"}, ids)

	// A listed container is adopted as the Proc Start returned.
	adopted, err := e.rt.Proc(ctx, a.Container)
	require.NoError(t, err)
	a.Started = time.Time{} // when tend started it, which the engine does not say
	require.Equal(t, a, adopted)
	require.True(t, e.rt.Alive(adopted))
}

// Logs returns what the program printed on stdout and stderr.
func TestLogs(t *testing.T) {
	e := setup(t)
	p := e.start(t, e.instance("edge-1", "job", "-say", "hello from svc", "-exit", "0"))
	_, err := e.rt.Wait(context.Background(), p)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, e.rt.Logs(context.Background(), &out, p.Container, 0, false))
	require.Contains(t, out.String(), "svc up pid 1\n")
	require.Contains(t, out.String(), "hello from svc\n")
	require.Contains(t, out.String(), "svc stderr\n")

	out.Reset()
	require.NoError(t, e.rt.Logs(context.Background(), &out, p.Container, 1, false))
	require.Equal(t, 1, strings.Count(out.String(), "\n"), "tail 1: %q", out.String())
}

// The client negotiates down to the engine's API version (1.41 for
// Debian's docker.io 20.10), and works at it.
func TestNegotiatesEngineVersion(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	v, err := e.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	require.NoError(t, err)
	got, err := e.rt.APIVersion(ctx)
	require.NoError(t, err)
	require.Equal(t, v.APIVersion, got)
	t.Logf("engine %s serves API %s; the runtime negotiated %s (client max %s)", v.Version, v.APIVersion, got, client.MaxAPIVersion)
	if v.APIVersion == "1.41" {
		require.Equal(t, "1.41", got)
	}
}

// Errors that name what is wrong and what to do, returned before anything
// runs.
func TestStartErrors(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		edit    func(*tc.Instance)
		invalid bool
		want    []string
	}{
		{"image not in the registry", func(in *tc.Instance) {
			in.Image = e.reg.Host + "/test/missing:1.0"
		}, true, []string{e.reg.Host + "/test/missing:1.0", "does not exist"}},
		{"digest not in the registry", func(in *tc.Instance) {
			in.Image = e.reg.Host + "/test/svc@sha256:" + strings.Repeat("0", 64)
		}, true, []string{"sha256:000000", "does not exist"}},
		{"device path missing", func(in *tc.Instance) {
			in.Devices = []string{"/dev/tend-no-such-device"}
		}, true, []string{"device /dev/tend-no-such-device does not exist"}},
		{"mount source missing", func(in *tc.Instance) {
			in.Mounts = []tc.Mount{{Source: "/nonexistent/tend", Target: "/m"}}
		}, true, []string{"mount source /nonexistent/tend"}},
		{"memory limit the engine refuses", func(in *tc.Instance) {
			in.Memory = 1 << 20
		}, true, []string{"resources.memory 1Mi is below the engine's minimum, 6Mi"}},
		{"gpus without the NVIDIA runtime", func(in *tc.Instance) {
			in.GPUs = "all"
		}, true, []string{"gpus all: the engine has no NVIDIA runtime", "NVIDIA Container Toolkit"}},
		{"unknown network", func(in *tc.Instance) {
			in.Network = "overlay"
		}, true, []string{`network "overlay"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := e.instance("err-dev", "bad")
			tt.edit(&in)
			p, err := e.rt.Run(ctx, in)
			if err == nil {
				_ = e.rt.Stop(ctx, p, 0)
			}
			require.Error(t, err)
			t.Log(err)
			require.Equal(t, tt.invalid, errorsIsInvalid(err), "%v", err)
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
			left, lerr := e.rt.List(ctx, "err-dev")
			require.NoError(t, lerr)
			require.Empty(t, left, "nothing created")
		})
	}
}

// No engine at the socket: the error names it and says how to start one.
func TestNoEngine(t *testing.T) {
	sock := t.TempDir() + "/docker.sock"
	rt, err := tc.New(tc.Options{Host: "unix://" + sock})
	require.NoError(t, err)
	defer rt.Close()
	_, err = rt.Run(context.Background(), tc.Instance{Service: "web", Image: "registry.local/x@sha256:" + strings.Repeat("a", 64)})
	require.ErrorIs(t, err, tc.ErrNoEngine)
	t.Log(err)
	require.False(t, errorsIsInvalid(err), "worth retrying: the engine may come up")
	for _, w := range []string{"unix://" + sock, "systemctl start docker", "systemctl start podman.socket"} {
		require.Contains(t, err.Error(), w)
	}
	_, err = rt.List(context.Background(), "edge-1")
	require.ErrorIs(t, err, tc.ErrNoEngine)
	_, err = rt.APIVersion(context.Background())
	require.ErrorIs(t, err, tc.ErrNoEngine)
}

// DOCKER_HOST names the engine when the options do not.
func TestHostFromEnv(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///run/podman/podman.sock")
	rt, err := tc.New(tc.Options{})
	require.NoError(t, err)
	defer rt.Close()
	require.Equal(t, "unix:///run/podman/podman.sock", rt.Host())
	os.Unsetenv("DOCKER_HOST")
	rt2, err := tc.New(tc.Options{})
	require.NoError(t, err)
	defer rt2.Close()
	require.Equal(t, tc.DefaultHost, rt2.Host())
}
