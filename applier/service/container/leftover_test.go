package container_test

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"testing"
	"time"

	mcontainer "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/container"
)

// When tend recreates a replica, it first stops what an engine killed
// during a start left of that replica: a container the engine shows as
// created whose task still runs, and one left running, both labelled as
// the replica under another invocation; then one container runs it.
//
// The test engine is shared by the package's tests and cannot be killed
// mid-start here, so the test builds the state such a kill leaves: a
// container labelled as replica 0 created but not started, with a
// process of the node carrying its invocation as TEND_INVOCATION_ID (the
// task the engine lost), and a running container labelled as replica 0.
func TestAgentStopsLeftoverReplica(t *testing.T) {
	n := newNode(t)
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n")
	_, err := n.apply(t)
	require.NoError(t, err)
	cs := n.containers(t)
	require.Len(t, cs, 1)
	recorded := cs[0].ID
	ctx := context.Background()

	labels := func(inv string) map[string]string {
		l := maps.Clone(cs[0].Labels)
		l[container.LabelInvocation] = inv
		return l
	}
	created, err := n.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: "tend-left-created",
		Config:     &mcontainer.Config{Image: n.img.Ref, Labels: labels("inv-created")},
		HostConfig: &mcontainer.HostConfig{NetworkMode: "none"}})
	require.NoError(t, err)
	task := exec.Command("sleep", "3600")
	task.Env = append(os.Environ(), service.InvocationEnv+"=inv-created")
	require.NoError(t, task.Start())
	t.Cleanup(func() { _ = task.Process.Kill() })
	taskDone := make(chan error, 1)
	go func() { taskDone <- task.Wait() }()
	running := runLabelled(t, n.cli, n.img.Ref, "tend-left-running", labels("inv-running"))

	// Drift: the recorded container is gone; the next apply recreates
	// the replica.
	_, err = n.cli.ContainerRemove(ctx, recorded, client.ContainerRemoveOptions{Force: true})
	require.NoError(t, err)
	_, err = n.apply(t)
	require.NoError(t, err)

	for _, id := range []string{created.ID, running} {
		_, err := n.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		require.Error(t, err, "the leftover %s is removed", id)
	}
	select {
	case <-taskDone:
	case <-time.After(30 * time.Second): // fails the test only
		t.Fatal("the task of the created leftover still runs")
	}
	cs = n.containers(t)
	require.Len(t, cs, 1, "one container runs the replica")
	require.Equal(t, "running", string(cs[0].State))
	require.NotEqual(t, recorded, cs[0].ID)
}
