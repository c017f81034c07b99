package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service/container"
	"github.com/tend-dev/tend/internal/testkit/testdocker"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// engineImages lists, every 20 ms until stop is called, the images the
// engine's containers of device run, and returns every one it saw.
func engineImages(t *testing.T, cli *client.Client, device string) (stop func() []string) {
	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
				Filters: make(client.Filters).Add("label", container.LabelDevice+"="+device)})
			if err == nil {
				mu.Lock()
				for _, c := range res.Items {
					seen[c.Image] = true
				}
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		close(done)
		wg.Wait()
		var out []string
		for img := range seen {
			out = append(out, img)
		}
		return out
	}
}

// The seed's scenario for a container service on the real engine: its
// image's tag moves, with no commit. A good image goes canary first, then
// the later wave after soak; a bad one (it exits at once) is rolled back
// on the canary, held by the brakes on the later device, which never
// runs it; a fixed one goes through.
func TestBrakesStopATagPushedImage(t *testing.T) {
	t.Parallel()
	host := testdocker.Host(t) // skips, as every container test does, where no engine can run
	h := startHub(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"), "")
	reg := testoci.Start(t)
	img := testdocker.PushProgram(t, reg.Host, "infer/web", testdocker.SvcDir())
	cli, err := client.New(client.WithHost(host))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	repo := testgit.NewRepo(t)
	// Each device's web serves on a port of its own (containers run on
	// the host's network), which its health probe asks.
	for _, device := range []string{"cam-101", "cam-102"} {
		addr := freeAddr(t)
		repo.WriteFile("devices/"+device+"/device.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: "+device+"}\nspec:\n"+
			"  services:\n    - name: web\n      image: "+img.Tag+"\n      args: [-listen, \""+addr+"\"]\n      stopTimeout: 2s\n"+
			"      health: {tcp: \""+addr+"\", interval: 200ms, startupGrace: 3s}\n")
	}
	repo.WriteFile("profiles/rollout.yaml", fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n"+
		"  waves:\n    - selector: {matchLabels: {ring: canary}}\n    - {percent: 100}\n"+
		"  brakes: {hub: %q, maxFailed: 0, minApplied: 1, soak: %s}\n", h.url, tagSoak))
	first := repo.Commit("web by its tag, by waves, with brakes")
	agent := func(device, ring string) *quarantineAgent {
		more := fmt.Sprintf("registries: {insecure: [%s]}\nruntime: {docker: {host: %s}}\nreport: {url: %s/v1/reports, interval: 1s, tokenFile: %s}\n",
			reg.Host, host, h.url, h.deviceToken(device))
		n := labeledNode(t, repo.Dir(), device, "ring: "+ring, more)
		t.Cleanup(func() {
			res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
				Filters: make(client.Filters).Add("label", container.LabelDevice+"="+device)})
			if err == nil {
				for _, c := range res.Items {
					_, _ = cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
				}
			}
			stopServices(t, n.state)
		})
		d := &quarantineAgent{name: device, n: n}
		d.start(t)
		return d
	}
	canary, later := agent("cam-101", "canary"), agent("cam-102", "main")
	fleet := []*quarantineAgent{canary, later}
	for _, d := range fleet {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s:\n%s", d.name, d.a.logs())
			}
		})
		eventually(t, func() bool { return d.a.status()["appliedRelease"] == "commit:"+first })
	}

	// A good image under the tag: the canary first, the later wave after
	// the canary's soak.
	good := testdocker.MoveTag(t, img.Tag, "BUILD=2")
	for _, d := range fleet {
		eventually(t, func() bool { return d.a.status()["appliedRelease"] == "service/web@"+good })
	}
	require.Positive(t, later.count(`held: brakes: `), "the later wave waited for the canary's soak:\n%s", later.a.logs())

	// A bad one: it exits at once, never listening (its entrypoint ends
	// the flags before the service's args). Rolled back on the canary
	// once its startup grace ends, held on the later device, whose engine
	// never runs it.
	stop := engineImages(t, cli, later.name)
	bad := testdocker.MoveTagConfig(t, img.Tag, func(c *v1.Config) {
		c.Env = append(c.Env, "BUILD=3")
		c.Entrypoint = []string{"/prog", "-exit", "3", "--"}
	})
	eventually(t, func() bool { return canary.count(rollingBack) == 1 })
	eventually(t, func() bool {
		st := later.a.status()
		rel, _ := st["release"].(map[string]any)
		held, _ := st["held"].(string)
		return rel != nil && rel["key"] == "service/web@"+bad &&
			strings.HasPrefix(held, "held: brakes: 1 of 1 wave-0 devices failed service/web@sha256:")
	})
	out, errOut, code := tend(t, "fleet", "release", "service/web@"+bad, "--hub", h.url, "--read-token-file", h.tokenFile)
	require.Equal(t, 1, code, out+errOut)

	// A fixed image goes through.
	fixed := testdocker.MoveTagConfig(t, img.Tag, func(c *v1.Config) {
		c.Env = append(c.Env, "BUILD=4")
		c.Entrypoint = []string{"/prog"}
	})
	for _, d := range fleet {
		eventually(t, func() bool { return d.a.status()["appliedRelease"] == "service/web@"+fixed })
	}
	for _, image := range stop() {
		require.NotContains(t, image, bad, "the later device ran the bad image")
	}
}
