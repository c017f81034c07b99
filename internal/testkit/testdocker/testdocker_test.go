package testdocker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testdocker"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

func TestMain(m *testing.M) { os.Exit(testdocker.Main(m)) }

// The engine answers on its private socket, and the moby client
// negotiates the API version down to the engine's (1.41 for Debian's
// docker.io 20.10).
func TestEngineNegotiates(t *testing.T) {
	host := testdocker.Host(t)
	require.True(t, strings.HasPrefix(host, "unix:///tmp/"), host)
	cli, err := client.New(client.WithHost(host))
	require.NoError(t, err)
	defer cli.Close()
	ping, err := cli.Ping(context.Background(), client.PingOptions{NegotiateAPIVersion: true})
	require.NoError(t, err)
	require.NotEmpty(t, ping.APIVersion)
	require.Equal(t, ping.APIVersion, cli.ClientVersion(), "the client speaks the engine's version")
	v, err := cli.ServerVersion(context.Background(), client.ServerVersionOptions{})
	require.NoError(t, err)
	t.Logf("engine %s, API %s, client negotiated %s (client max %s, min %s)", v.Version, v.APIVersion, cli.ClientVersion(), client.MaxAPIVersion, client.MinAPIVersion)
}

// A program pushed FROM scratch to a test registry is pulled by the
// engine under its digest.
func TestPushProgramPulls(t *testing.T) {
	host := testdocker.Host(t)
	reg := testoci.Start(t)
	img := testdocker.PushProgram(t, reg.Host, "test/svc", testdocker.SvcDir())
	require.True(t, strings.HasPrefix(img.Digest, "sha256:"), img.Digest)
	require.Equal(t, reg.Host+"/test/svc@"+img.Digest, img.Ref)

	cli, err := client.New(client.WithHost(host))
	require.NoError(t, err)
	defer cli.Close()
	ctx := context.Background()
	resp, err := cli.ImagePull(ctx, img.Ref, client.ImagePullOptions{})
	require.NoError(t, err)
	require.NoError(t, resp.Wait(ctx))
	require.NoError(t, resp.Close())
	in, err := cli.ImageInspect(ctx, img.Ref)
	require.NoError(t, err)
	require.Contains(t, in.RepoDigests, img.Ref)
	require.Equal(t, []string{"/prog"}, in.Config.Entrypoint)
}

// PushImage pushes under the tag it is given, and the registry answers
// that tag with the digest it returns; BuildProgram names a folder that
// does not build.
func TestPushImageTag(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds a program; make test runs it, -short skips it")
	}
	reg := testoci.Start(t)
	bin := filepath.Join(t.TempDir(), "svc")
	require.NoError(t, testdocker.BuildProgram(testdocker.SvcDir(), bin))
	img, err := testdocker.PushImage(reg.Host, "apps/svc", "v1", bin)
	require.NoError(t, err)
	require.Equal(t, reg.Host+"/apps/svc:v1", img.Tag)
	require.Equal(t, reg.Host+"/apps/svc@"+img.Digest, img.Ref)
	ref, err := name.ParseReference(img.Tag, name.Insecure)
	require.NoError(t, err)
	desc, err := remote.Head(ref)
	require.NoError(t, err)
	require.Equal(t, img.Digest, desc.Digest.String())

	err = testdocker.BuildProgram(t.TempDir(), filepath.Join(t.TempDir(), "none"))
	require.ErrorContains(t, err, "build ")
	_, err = testdocker.PushImage(reg.Host, "apps/none", "v1", filepath.Join(t.TempDir(), "none"))
	require.ErrorContains(t, err, "none")
}
