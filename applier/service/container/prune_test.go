package container_test

import (
	"context"
	"maps"
	"testing"
	"time"

	mcontainer "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/container"
)

// runLabelled creates and starts a container named name with labels, as
// someone other than tend would, and removes it when the test ends.
func runLabelled(t *testing.T, cli *client.Client, image, name string, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name,
		Config:     &mcontainer.Config{Image: image, Labels: labels},
		HostConfig: &mcontainer.HostConfig{NetworkMode: "none"}})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}) })
	_, err = cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{})
	require.NoError(t, err)
	return c.ID
}

// Prune removes a container only when a record names it (tend's name for
// a recorded replica) under another invocation: the recorded one stays,
// and so does one that merely carries tend's labels, even this replica's.
func TestPruneOnlyRecorded(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	web := e.instance("prune-dev", "web")
	web.Invocation = "inv-web"
	live := e.start(t, web)
	job := e.instance("prune-dev", "job")
	job.Invocation = "inv-job-old"
	left := e.start(t, job)
	labels := maps.Clone(e.inspect(t, live.Container).Container.Config.Labels)
	labels[container.LabelInvocation] = "users"
	users := runLabelled(t, e.cli, e.img.Ref, "users-web", labels)

	recorded := func() ([]service.Instance, error) {
		// The job's record names its next start, not the one left.
		return []service.Instance{record(web, web.Invocation), record(job, "inv-job-new")}, nil
	}
	removed, err := e.rt.Prune(ctx, "prune-dev", recorded)
	require.NoError(t, err)
	require.Equal(t, []string{left.Container}, removed, "only the job's earlier container")
	require.True(t, e.rt.Alive(live), "the recorded container stays")
	require.True(t, e.inspect(t, users).Container.State.Running, "a container with tend's labels that no record names stays")
}

// record is in as the supervisor's record of it names it, under
// invocation.
func record(in container.Instance, invocation string) service.Instance {
	return service.Instance{Service: in.Service, Replica: in.Replica, Invocation: invocation,
		Spec: container.Spec{Image: in.Image, Labels: in.Labels}}
}

// An apply of a commit that changes nothing on the node (it cleans up
// after itself) leaves a user's own running container alone, though it
// carries the labels of this device's service.
func TestAgentKeepsLabelledContainerItDidNotCreate(t *testing.T) {
	n := newNode(t)
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n")
	_, err := n.apply(t)
	require.NoError(t, err)
	cs := n.containers(t)
	require.Len(t, cs, 1)
	labels := maps.Clone(cs[0].Labels)
	labels[container.LabelInvocation] = "users"
	users := runLabelled(t, n.cli, n.img.Ref, "users-web", labels)

	n.repo.WriteFile("README.md", "the fleet\n")
	n.repo.Commit("docs")
	res, err := n.apply(t)
	require.NoError(t, err)
	require.Empty(t, res.Applied, "nothing to change")
	in, err := n.cli.ContainerInspect(context.Background(), users, client.ContainerInspectOptions{})
	require.NoError(t, err, "the user's container is not removed")
	require.True(t, in.Container.State.Running)
	require.Len(t, n.containers(t), 2, "tend's and the user's")
}

// Orphans finds the container started under an invocation, by its label,
// and no other: what a record that said it was starting sweeps when tend
// died before recording the start.
func TestOrphansByInvocation(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	in := e.instance("orphan-dev", "web")
	in.Invocation = "inv-crashed"
	p := e.start(t, in)
	other := e.instance("orphan-dev", "web")
	other.Replica, other.Invocation = 1, "inv-other"
	e.start(t, other)

	sin := record(in, in.Invocation)
	found, err := e.rt.Orphans(t.Context(), sin, time.Time{})
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.NoError(t, found[0].Stop(ctx, 0))
	_, err = e.cli.ContainerInspect(ctx, p.Container, client.ContainerInspectOptions{})
	require.Error(t, err, "stopped and removed")

	sin.Invocation = ""
	found, err = e.rt.Orphans(t.Context(), sin, time.Time{})
	require.NoError(t, err)
	require.Empty(t, found, "a record without an invocation names no container")
}
