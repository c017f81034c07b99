package container_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	mcontainer "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/agent"
	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/container"
	"github.com/tend-dev/tend/internal/testkit/testdocker"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// node is one device whose services run on the package's private engine,
// reading a fleet repo and pulling from a test registry.
type node struct {
	c    *manifest.AgentConfig
	repo *testgit.Repo
	reg  *testoci.Registry
	cli  *client.Client
	img  testdocker.Image
}

func newNode(t *testing.T) *node {
	t.Helper()
	host := testdocker.Host(t)
	reg := testoci.Start(t)
	img := testdocker.PushProgram(t, reg.Host, "infer/svc", testdocker.SvcDir())
	repo := testgit.NewRepo(t)
	dir := t.TempDir()
	c := &manifest.AgentConfig{Device: "cam-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), Source: manifest.SourceConfig{URL: repo.Dir(), Path: "devices/{device}"},
		StateDir: filepath.Join(dir, "state"), Root: filepath.Join(dir, "root"), AllowPaths: []string{"/etc/infer"},
		Registries: manifest.Registries{Insecure: []string{reg.Host}}, Runtime: manifest.RuntimeConfig{Docker: manifest.DockerRuntime{Host: host}}}
	c.SetDefaults("")
	require.NoError(t, os.MkdirAll(c.Root, 0o755))
	cli, err := client.New(client.WithHost(host))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	n := &node{c: c, repo: repo, reg: reg, cli: cli, img: img}
	t.Cleanup(func() { n.removeAll(t) })
	return n
}

// declare commits the device's services.
func (n *node) declare(t *testing.T, services string) string {
	t.Helper()
	n.repo.WriteFile("devices/"+n.c.Device+"/d.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: "+n.c.Device+"}\nspec:\n"+
		"  files:\n    - {path: /etc/infer/greeting, content: hello}\n  services:\n"+services)
	return n.repo.Commit("services")
}

func (n *node) apply(t *testing.T) (*agent.Result, error) {
	t.Helper()
	return (&agent.Reconciler{Config: n.c}).Apply(context.Background())
}

// containers lists tend's containers of this device on the engine.
func (n *node) containers(t *testing.T) []mcontainer.Summary {
	t.Helper()
	res, err := n.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", container.LabelDevice+"="+n.c.Device)})
	require.NoError(t, err)
	return res.Items
}

func (n *node) removeAll(t *testing.T) {
	for _, c := range n.containers(t) {
		_, _ = n.cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
	}
}

// moveTag pushes another image (the same program, another config) under
// the image's tag and returns its digest.
func (n *node) moveTag(t *testing.T) string {
	t.Helper()
	return n.moveTagTo(t, "BUILD=2")
}

// moveTagTo pushes the image under the image's tag with env added and
// cmd as its default arguments, and returns its digest.
func (n *node) moveTagTo(t *testing.T, env string, cmd ...string) string {
	t.Helper()
	return testdocker.MoveTag(t, n.img.Tag, env, cmd...)
}

// A container service runs the digest its tag resolved to, with tend's
// labels and the engine's restart policy off; status shows its container
// and image. Removed by hand, it is drift, restored at the next tick. A
// tag that moves replaces it, and the plan names the digests and the tag.
func TestAgentRunsContainerService(t *testing.T) {
	n := newNode(t)
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n      args: [-say, hello]\n"+
		"      mounts: [{source: /etc/infer/greeting, target: /greeting, readOnly: true}]\n")
	res, err := n.apply(t)
	require.NoError(t, err)
	require.Len(t, res.Applied, 2)

	cs := n.containers(t)
	require.Len(t, cs, 1)
	c := cs[0]
	require.Equal(t, "running", string(c.State))
	require.Equal(t, "service/web", c.Labels[container.LabelResource])
	require.NotEmpty(t, c.Labels[container.LabelSpec])
	in, err := n.cli.ContainerInspect(context.Background(), c.ID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.Equal(t, n.img.Ref, in.Container.Config.Image, "the container runs the resolved digest")
	require.Equal(t, "no", string(in.Container.HostConfig.RestartPolicy.Name), "tend is the one supervisor")
	require.Equal(t, "host", string(in.Container.HostConfig.NetworkMode))
	require.Len(t, in.Container.HostConfig.Mounts, 1)
	m := in.Container.HostConfig.Mounts[0]
	require.Equal(t, []any{filepath.Join(n.c.Root, "etc/infer/greeting"), "/greeting", true}, []any{m.Source, m.Target, m.ReadOnly})

	// Removed by hand: drift, restored.
	_, err = n.cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
	require.NoError(t, err)
	res, err = n.apply(t)
	require.NoError(t, err)
	require.Len(t, res.Drift, 1)
	require.Equal(t, "service/web", res.Drift[0].Resource)
	cs = n.containers(t)
	require.Len(t, cs, 1)
	require.NotEqual(t, c.ID, cs[0].ID)
	require.Equal(t, "running", string(cs[0].State))

	// Nothing changed: nothing to do.
	res, err = n.apply(t)
	require.NoError(t, err)
	require.True(t, res.Plan.Empty(), "%v", res.Plan.Actions)

	// The tag moves: the container is replaced, and the plan says why.
	moved := n.moveTag(t)
	res, err = n.apply(t)
	require.NoError(t, err)
	require.Len(t, res.Applied, 1)
	a := res.Applied[0]
	require.Equal(t, planner.Update, a.Type)
	require.Equal(t, fmt.Sprintf("update: image %s → %s (tag latest moved)", planner.ShortDigest(n.img.Digest), planner.ShortDigest(moved)), a.Reason)
	cs = n.containers(t)
	require.Len(t, cs, 1)
	in, err = n.cli.ContainerInspect(context.Background(), cs[0].ID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(in.Container.Config.Image, "@"+moved), in.Container.Config.Image)
}

// No engine at the socket: the error names it and says how to start one.
func TestAgentNoEngine(t *testing.T) {
	n := newNode(t)
	n.c.Runtime.Docker.Host = "unix://" + filepath.Join(t.TempDir(), "none.sock")
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n")
	_, err := n.apply(t)
	require.Error(t, err)
	require.Contains(t, err.Error(), n.c.Runtime.Docker.Host)
	require.Contains(t, err.Error(), "systemctl start docker")
}

// tend logs reads a container service's output through the engine, each
// line after its replica when there are several.
func TestAgentContainerLogs(t *testing.T) {
	n := newNode(t)
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n      replicas: 2\n      args: [-say, \"hi from ${replica}\"]\n")
	_, err := n.apply(t)
	require.NoError(t, err)
	rts := agent.Runtimes(n.c, nil)
	defer rts.Close()
	logs := func(w *bytes.Buffer, name string, replica int) error {
		return service.Logs(context.Background(), w, rts, n.c.StateDir, name, replica, service.LogOptions{})
	}

	var all bytes.Buffer
	require.NoError(t, logs(&all, "web", -1))
	require.Contains(t, all.String(), "replica 0 | hi from 0\n")
	require.Contains(t, all.String(), "replica 1 | hi from 1\n")
	require.Contains(t, all.String(), "replica 1 | svc stderr\n")

	var one bytes.Buffer
	require.NoError(t, logs(&one, "web", 1))
	require.Contains(t, one.String(), "hi from 1\n")
	require.NotContains(t, one.String(), "replica")
	require.NotContains(t, one.String(), "hi from 0")

	err = logs(&one, "web", 5)
	require.EqualError(t, err, "no container for service/web replica 5: it has not run on this node")

	err = logs(&one, "other", -1)
	require.ErrorContains(t, err, "no logs for service/other", "a service that never ran has no logs")
}

// After a successful apply, a container of this device that no record
// names stays, as another device's does (tend removes only what it
// recorded creating), and of the images no service runs any more, the
// one used last stays for a rollback and older ones go.
func TestAgentPrunesContainersAndImages(t *testing.T) {
	n := newNode(t)
	n.c.Models.KeepVersions = new(int)
	*n.c.Models.KeepVersions = 1
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n")
	_, err := n.apply(t)
	require.NoError(t, err)
	first := n.img.Ref

	// A stray container with this device's labels, and one of another
	// device.
	rt, err := container.New(container.Options{Host: n.c.Runtime.Docker.Host})
	require.NoError(t, err)
	defer rt.Close()
	stray := func(device string) container.Proc {
		p, err := rt.Run(context.Background(), container.Instance{Service: "ghost", Image: n.img.Ref,
			Labels: map[string]string{container.LabelDevice: device, container.LabelResource: "service/ghost"}})
		require.NoError(t, err)
		return p
	}
	mine, other := stray(n.c.Device), stray(n.c.Device+"-other")
	t.Cleanup(func() { _ = rt.Stop(context.Background(), other, 0) })
	t.Cleanup(func() { _ = rt.Stop(context.Background(), mine, 0) })

	second := n.moveTag(t)
	_, err = n.apply(t)
	require.NoError(t, err)
	_, err = n.cli.ContainerInspect(context.Background(), mine.Container, client.ContainerInspectOptions{})
	require.NoError(t, err, "a container of this device that no record names stays")
	_, err = n.cli.ContainerInspect(context.Background(), other.Container, client.ContainerInspectOptions{})
	require.NoError(t, err, "another device's container stays")
	require.True(t, n.hasImage(t, first), "the image used last before stays for a rollback")

	require.NoError(t, rt.Stop(context.Background(), other, 0)) // they use the first image
	require.NoError(t, rt.Stop(context.Background(), mine, 0))
	n.moveTag(t)
	_, err = n.apply(t)
	require.NoError(t, err)
	require.False(t, n.hasImage(t, first), "an image two versions back is removed")
	require.True(t, n.hasImage(t, n.reg.Ref("infer/svc")+"@"+second))
}

func (n *node) hasImage(t *testing.T, ref string) bool {
	t.Helper()
	_, err := n.cli.ImageInspect(context.Background(), ref)
	return err == nil
}

// An agent watching a container service sees its main process killed at
// once, through the engine, and starts it again under the restart policy:
// one supervisor, the engine's own restart policy off. It restarts the
// same container in place, whose output stays: tend logs --previous
// prints the killed instance's, tend logs the new one's. A spec that
// changes creates a new container, and the old one's output goes with it.
func TestAgentRestartsKilledContainer(t *testing.T) {
	n := newNode(t)
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n      args: [-id]\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sup := agent.NewSupervisor(n.c, nil)
	require.NoError(t, sup.Start(ctx))
	defer sup.Stop()
	_, err := (&agent.Reconciler{Config: n.c, Supervisor: sup}).Apply(ctx)
	require.NoError(t, err)
	insts, err := sup.Instances("web")
	require.NoError(t, err)
	require.Len(t, insts, 1)
	first := insts[0].Container
	in, err := n.cli.ContainerInspect(ctx, first, client.ContainerInspectOptions{})
	require.NoError(t, err)
	restarted := make(chan string, 1)
	sup.OnRestart(func(service string) {
		select { // fn must not block
		case restarted <- service:
		default:
		}
	})

	rts := agent.Runtimes(n.c, nil)
	defer rts.Close()
	logs := func(replica int, previous bool) (string, error) {
		var b bytes.Buffer
		err := service.Logs(ctx, &b, rts, n.c.StateDir, "web", replica, service.LogOptions{Previous: previous})
		return b.String(), err
	}
	runID := func(out string) string {
		_, id, _ := strings.Cut(out, "svc run ")
		id, _, _ = strings.Cut(id, "\n")
		return id
	}
	var killed string
	require.Eventually(t, func() bool { out, _ := logs(-1, false); killed = runID(out); return killed != "" }, 30*time.Second, 10*time.Millisecond)
	_, err = logs(0, true)
	require.EqualError(t, err, "service/web replica 0 has not restarted since it started: no earlier instance to print (tend logs without --previous prints the one that runs)")
	require.NoError(t, syscall.Kill(in.Container.State.Pid, syscall.SIGKILL))

	select {
	case <-restarted:
	case <-time.After(30 * time.Second): // fails the test only
		t.Fatal("the killed container was not restarted")
	}
	states, err := sup.Instances("web")
	require.NoError(t, err)
	require.Len(t, states, 1)
	require.True(t, states[0].Alive)
	require.Equal(t, first, states[0].Container, "restarted in place")
	require.Equal(t, 1, states[0].Restarts)
	require.Contains(t, states[0].LastExit, "killed by signal killed")
	require.False(t, states[0].LastExitAt.IsZero())
	cs := n.containers(t)
	require.Len(t, cs, 1)
	require.Equal(t, "running", string(cs[0].State))

	var now string
	require.Eventually(t, func() bool { out, _ := logs(-1, false); now = runID(out); return now != "" }, 30*time.Second, 10*time.Millisecond)
	require.NotEqual(t, killed, now, "tend logs prints the instance that runs")
	prev, err := logs(-1, true)
	require.NoError(t, err)
	require.Equal(t, killed, runID(prev), "tend logs --previous prints the killed instance: %q", prev)
	require.NotContains(t, prev, now)

	// A new spec: a new container; the one before is gone, and says so.
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n      args: [-id, -say, changed]\n")
	_, err = (&agent.Reconciler{Config: n.c, Supervisor: sup}).Apply(ctx)
	require.NoError(t, err)
	cs = n.containers(t)
	require.Len(t, cs, 1)
	require.NotEqual(t, first, cs[0].ID, "a changed spec creates a new container")
	_, err = logs(0, true)
	require.EqualError(t, err, "service/web replica 0: the container of its earlier instance, "+first[:12]+
		", was removed when tend created a new one in its place (its spec, image or mounts changed, or it was gone or damaged): its output is gone")
}

// A container removed by hand while an agent watches it is drift, not a
// crash: the supervisor does not restart it (the schedule here is an
// hour away), no crash is counted, and the agent ticks at once, which
// reports the drift and starts a new container.
func TestAgentContainerRemovedByHandIsDrift(t *testing.T) {
	n := newNode(t)
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n")
	type tick struct {
		res *agent.Result
		err error
	}
	ticks := make(chan tick, 10)
	l := agent.NewLoop(&agent.Reconciler{Config: n.c}, agent.LoopOptions{Schedule: cron.Every(time.Hour),
		OnTick: func(res *agent.Result, err error) { ticks <- tick{res, err} }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, l.Start(ctx))
	defer func() { require.NoError(t, l.Stop()) }()
	next := func() tick {
		t.Helper()
		select {
		case tk := <-ticks:
			return tk
		case <-time.After(60 * time.Second): // fails the test only
			t.Fatal("no tick")
			return tick{}
		}
	}
	// The image is staged beside the first tick; a tick applies it.
	for applied := false; !applied; {
		tk := next()
		require.NoError(t, tk.err)
		applied = len(tk.res.Applied) > 0
	}
	cs := n.containers(t)
	require.Len(t, cs, 1)
	old := cs[0].ID

	_, err := n.cli.ContainerRemove(ctx, old, client.ContainerRemoveOptions{Force: true})
	require.NoError(t, err)

	tk := next()
	require.NoError(t, tk.err)
	require.Len(t, tk.res.Drift, 1, "%v", tk.res.Plan.Actions)
	d := tk.res.Drift[0]
	require.Equal(t, "service/web", d.Resource)
	require.Equal(t, "1 of 1 replicas not running (replica 0 "+service.RemovedExit+")", d.Reason)
	cs = n.containers(t)
	require.Len(t, cs, 1)
	require.NotEqual(t, old, cs[0].ID)
	require.Equal(t, "running", string(cs[0].State))

	sup := service.NewSupervisor(n.c.StateDir, agent.Runtimes(n.c, nil), nil)
	states, err := sup.Instances("web")
	require.NoError(t, err)
	require.Len(t, states, 1)
	require.True(t, states[0].Alive)
	require.False(t, states[0].CrashLoop)
	require.Equal(t, cs[0].ID, states[0].Container)
}

// A container the supervisor stops because its probe failed is stopped,
// not removed, and restarted in place: an exit under the restart policy,
// not a removal outside tend.
func TestAgentRestartsUnhealthyContainer(t *testing.T) {
	n := newNode(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n"+
		"      health: {tcp: \""+ln.Addr().String()+"\", interval: 200ms, failureThreshold: 1, startupGrace: 10s}\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sup := agent.NewSupervisor(n.c, nil)
	require.NoError(t, sup.Start(ctx))
	defer sup.Stop()
	_, err = (&agent.Reconciler{Config: n.c, Supervisor: sup}).Apply(ctx)
	require.NoError(t, err)
	insts, err := sup.Instances("web")
	require.NoError(t, err)
	require.Len(t, insts, 1)
	first := insts[0].Container
	restarted, removed := make(chan string, 1), make(chan string, 1)
	sup.OnRestart(func(service string) {
		select {
		case restarted <- service:
		default:
		}
	})
	sup.OnRemoved(func(service string) {
		select {
		case removed <- service:
		default:
		}
	})
	require.NoError(t, ln.Close()) // the probe fails from now on

	select {
	case <-restarted:
	case <-removed:
		t.Fatal("the container its probe stopped was taken for one removed outside tend")
	case <-time.After(30 * time.Second): // fails the test only
		t.Fatal("no replacement for the unhealthy container")
	}
	states, err := sup.Instances("web")
	require.NoError(t, err)
	require.Len(t, states, 1)
	require.Equal(t, first, states[0].Container, "restarted in place")
	require.NotEqual(t, service.RemovedExit, states[0].LastExit)
}

// What cannot run as declared fails the plan before anything is stopped:
// an image the registry does not have, a tag moved to an image with no
// build for this platform, a device node the node lacks, a memory limit
// below the engine's minimum. The running container stays as it was.
func TestAgentBadContainerStopsNothing(t *testing.T) {
	n := newNode(t)
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n")
	_, err := n.apply(t)
	require.NoError(t, err)
	before := n.containers(t)
	require.Len(t, before, 1)

	arm := n.reg.Ref("infer/arm:1")
	n.pushOtherPlatform(t, arm)
	missing := n.reg.Ref("infer/svc:nope")
	for _, tc := range []struct{ name, image, decl, want string }{
		{"image missing", missing, "", missing},
		{"no build for this platform", arm, "", "has no build for this node's platform, linux/" + runtime.GOARCH + ": push one for it"},
		{"device missing", n.img.Tag, "      devices: [/dev/tend-no-such-device]\n", "device /dev/tend-no-such-device does not exist on this node"},
		{"memory below the minimum", n.img.Tag, "      resources: {memory: 1Mi}\n", "resources.memory 1Mi is below the engine's minimum, 6Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n.declare(t, "    - name: web\n      image: "+tc.image+"\n      args: [-say, changed]\n"+tc.decl)
			_, err := n.apply(t)
			require.Error(t, err)
			require.Contains(t, err.Error(), "service/web")
			require.Contains(t, err.Error(), tc.want)
			after := n.containers(t)
			require.Len(t, after, 1)
			require.Equal(t, before[0].ID, after[0].ID, "nothing was stopped")
			require.Equal(t, "running", string(after[0].State))
		})
	}
}

// pushOtherPlatform pushes, under ref, an index whose only image is built
// for another architecture than this node's.
func (n *node) pushOtherPlatform(t *testing.T, ref string) {
	t.Helper()
	src, err := name.ParseReference(n.img.Ref, name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(src)
	require.NoError(t, err)
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	cf = cf.DeepCopy()
	cf.Architecture = other
	img, err = mutate.ConfigFile(img, cf)
	require.NoError(t, err)
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img,
		Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: other}}})
	dst, err := name.ParseReference(ref, name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.WriteIndex(dst, idx))
}

// A container that exits at its start fails the update, and the whole
// plan is rolled back: the container of the last applied commit runs
// again, and the commit is quarantined on this node.
func TestAgentRollsBackContainer(t *testing.T) {
	n := newNode(t)
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n      args: [-say, good]\n")
	_, err := n.apply(t)
	require.NoError(t, err)

	bad := n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n      args: [-exit, \"3\"]\n      health: {tcp: \"127.0.0.1:1\", startupGrace: 2s}\n")
	_, err = n.apply(t)
	require.Error(t, err)
	require.Contains(t, err.Error(), "rolled back")
	cs := n.containers(t)
	require.Len(t, cs, 1)
	require.Equal(t, "running", string(cs[0].State))
	in, err := n.cli.ContainerInspect(context.Background(), cs[0].ID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"-say", "good"}, in.Container.Config.Cmd, "the last applied container runs again")

	_, err = n.apply(t)
	require.Error(t, err)
	require.Contains(t, err.Error(), "commit "+bad[:12]+" was rolled back on this node")
}

// A new image whose registry cannot be reached holds its service: the
// running container stays, and the rest of the commit is applied. The
// same image with its registry down keeps its digest, a warning only.
func TestAgentUnreachableRegistry(t *testing.T) {
	n := newNode(t)
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n")
	_, err := n.apply(t)
	require.NoError(t, err)
	before := n.containers(t)
	require.Len(t, before, 1)

	down := "127.0.0.1:1/infer/svc:2"
	n.c.Registries.Insecure = append(n.c.Registries.Insecure, "127.0.0.1:1")
	n.repo.WriteFile("devices/"+n.c.Device+"/d.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: "+n.c.Device+"}\nspec:\n"+
		"  files:\n    - {path: /etc/infer/greeting, content: changed}\n  services:\n    - name: web\n      image: "+down+"\n")
	n.repo.Commit("a new image on a registry that is down")
	res, _ := n.apply(t)
	require.NotNil(t, res.Desired)
	require.ErrorContains(t, res.Desired.Held, "service/web held")
	b, err := os.ReadFile(filepath.Join(n.c.Root, "etc/infer/greeting"))
	require.NoError(t, err)
	require.Equal(t, "changed", string(b), "the rest of the commit is applied")
	after := n.containers(t)
	require.Len(t, after, 1)
	require.Equal(t, before[0].ID, after[0].ID, "the held service's container stays")

	// The applied image, its registry gone: offline, the digest kept.
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n")
	_, err = n.apply(t)
	require.NoError(t, err)
	running := n.containers(t)
	n.reg.Use(func(w http.ResponseWriter, _ *http.Request) bool { panic(http.ErrAbortHandler) })
	defer n.reg.Use(nil)
	res, err = n.apply(t)
	require.NoError(t, err)
	require.ErrorContains(t, res.Offline(), "service/web kept at "+planner.ShortDigest(n.img.Digest))
	require.True(t, res.Plan.Empty(), "%v", res.Plan.Actions)
	require.Equal(t, running[0].ID, n.containers(t)[0].ID)
}
