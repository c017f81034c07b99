package container_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service/container"
)

// A mount source is mounted as the path its symlinks lead to, and only
// when that lies under allowPaths (under root) or in the model store: a
// link under allowPaths to any other folder of the node is refused,
// naming the service, the source and where it leads, and nothing is
// created.
func TestRunConfinesMountSources(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	base := t.TempDir()
	root, state, outside := filepath.Join(base, "root"), filepath.Join(base, "state"), filepath.Join(base, "outside")
	allowed := filepath.Join(root, "etc/infer")
	version := filepath.Join(state, "models/detector/sha256-ab")
	for _, d := range []string{allowed, version, outside} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.Mkdir(filepath.Join(allowed, "data"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(allowed, "data"), filepath.Join(allowed, "alias")))
	require.NoError(t, os.Symlink(version, filepath.Join(allowed, "detector")))
	require.NoError(t, os.Symlink(outside, filepath.Join(allowed, "escape")))
	require.NoError(t, os.Symlink("../../../outside", filepath.Join(allowed, "relative")))
	rt, err := container.New(container.Options{Host: e.rt.Host(),
		Confine: &container.Confinement{Root: root, AllowPaths: []string{"/etc/infer"}, StateDir: state}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close() })

	for _, tt := range []struct {
		name, source, mounted string
	}{
		{"a folder under allowPaths", filepath.Join(allowed, "data"), filepath.Join(allowed, "data")},
		{"a link within allowPaths", filepath.Join(allowed, "alias"), filepath.Join(allowed, "data")},
		{"a model's link into the model store", filepath.Join(allowed, "detector"), version},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := e.instance("mnt-dev", "ok")
			in.Mounts = []container.Mount{{Source: tt.source, Target: "/m"}}
			p, err := rt.Run(ctx, in)
			require.NoError(t, err)
			t.Cleanup(func() { _ = rt.Stop(ctx, p, 0) })
			ms := e.inspect(t, p.Container).Container.HostConfig.Mounts
			require.Len(t, ms, 1)
			require.Equal(t, tt.mounted, ms[0].Source)
		})
	}
	for _, tt := range []struct{ name, source string }{
		{"an absolute link out", filepath.Join(allowed, "escape")},
		{"a relative link out", filepath.Join(allowed, "relative")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := e.instance("mnt-dev", "bad")
			in.Mounts = []container.Mount{{Source: tt.source, Target: "/m"}}
			p, err := rt.Run(ctx, in)
			if err == nil {
				_ = rt.Stop(ctx, p, 0)
			}
			require.Error(t, err)
			require.True(t, errorsIsInvalid(err), "%v", err)
			for _, w := range []string{"service bad", "mount source " + tt.source, "resolves to " + outside, "remove the link"} {
				require.Contains(t, err.Error(), w)
			}
			require.Error(t, rt.Check(in), "a plan refuses it before it stops anything")
			left, err := rt.List(ctx, "mnt-dev")
			require.NoError(t, err)
			for _, c := range left {
				require.NotEqual(t, "tend-mnt-dev-bad-0", c.Name, "nothing created")
			}
		})
	}
}

// An agent refuses a service whose mount source under allowPaths is a
// symlink to a folder outside them: the apply fails before anything is
// stopped, the container it ran keeps running as it was, and no
// container sees the folder.
func TestAgentRefusesMountLeadingOut(t *testing.T) {
	n := newNode(t)
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n")
	_, err := n.apply(t)
	require.NoError(t, err)
	before := n.containers(t)
	require.Len(t, before, 1)

	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("node only"), 0o600))
	link := filepath.Join(n.c.Root, "etc/infer/data")
	require.NoError(t, os.Symlink(outside, link))
	n.declare(t, "    - name: web\n      image: "+n.img.Tag+"\n      mounts: [{source: /etc/infer/data, target: /data}]\n")
	_, err = n.apply(t)
	require.Error(t, err)
	for _, w := range []string{"service web", "mount source " + link, "resolves to " + outside} {
		require.Contains(t, err.Error(), w)
	}
	after := n.containers(t)
	require.Len(t, after, 1)
	require.Equal(t, before[0].ID, after[0].ID, "the running container was not stopped")
	require.Equal(t, "running", string(after[0].State))
	in, err := n.cli.ContainerInspect(context.Background(), after[0].ID, client.ContainerInspectOptions{})
	require.NoError(t, err)
	require.Empty(t, in.Container.HostConfig.Mounts, "no container mounts the folder outside")
}
