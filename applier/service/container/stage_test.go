package container_test

import (
	"context"
	"testing"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/agent"
)

// An agent stages a container service's new image in the background (the
// engine pulls it while the running container stays), and the tick after
// activates it without pulling.
func TestAgentStagesImage(t *testing.T) {
	n := newNode(t)
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n")
	ready := make(chan struct{}, 4)
	st := &agent.Stager{Ready: func() { ready <- struct{}{} }}
	t.Cleanup(st.Stop)
	r := &agent.Reconciler{Config: n.c, Stager: st}
	res, err := r.Apply(context.Background())
	require.NoError(t, err)
	require.NotNil(t, res.Staging, "the engine does not have the image yet: it stages")
	require.Empty(t, n.containers(t), "nothing runs until it is staged")
	<-ready
	res, err = r.Apply(context.Background())
	require.NoError(t, err)
	require.Nil(t, res.Staging)
	before := n.containers(t)
	require.Len(t, before, 1)

	moved := n.moveTag(t)
	res, err = r.Apply(context.Background())
	require.NoError(t, err)
	require.NotNil(t, res.Staging)
	require.Equal(t, []string{"service/web"}, res.Staging.Resources)
	require.Equal(t, before[0].ID, n.containers(t)[0].ID, "the running container stays while its image stages")
	<-ready
	blobs := n.reg.BlobBytes.Load()
	res, err = r.Apply(context.Background())
	require.NoError(t, err)
	require.Nil(t, res.Staging)
	after := n.containers(t)
	require.Len(t, after, 1)
	in, err := n.cli.ContainerInspect(context.Background(), after[0].ID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.Contains(t, in.Container.Config.Image, moved, "the staged image runs")
	require.Equal(t, blobs, n.reg.BlobBytes.Load(), "the activation pulled nothing")
}
