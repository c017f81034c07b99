package e2e

// The upgrade path: a node converged by the previous release of tend
// (internal/testkit/oldtend builds it from the repository's history) is
// taken over by this tend on the same root and stateDir. Its plan is
// empty, a one-shot apply and then the agent keep the services the old
// tend started as they run, and what the old tend created is pruned once a
// later commit drops it. Only the old tend's effects are checked, never
// its output, which is another release's.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service/container"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/internal/testkit/oldtend"
	"github.com/tend-dev/tend/internal/testkit/testdocker"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// upgradeDevice declares two files, a model, a process service (worker)
// and a container service (web); without dropped, the second file and the
// worker are left out.
func upgradeDevice(model, image, prog string, dropped bool) string {
	worker, _ := json.Marshal([]string{prog})
	var b strings.Builder
	b.WriteString("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n")
	b.WriteString("  files:\n    - {path: /etc/infer/config.yaml, content: \"threshold: 0.4\\n\"}\n")
	if dropped {
		b.WriteString("    - {path: /etc/infer/labels.txt, content: \"person\\n\"}\n")
	}
	fmt.Fprintf(&b, "  models:\n    - {name: detector, ref: %q, path: /opt/models/detector}\n", model)
	b.WriteString("  services:\n")
	if dropped {
		fmt.Fprintf(&b, "    - {name: worker, command: %s, stopTimeout: 2s}\n", worker)
	}
	fmt.Fprintf(&b, "    - {name: web, image: %q, args: [-say, hello], stopTimeout: 2s}\n", image)
	return b.String()
}

// engineContainer is what the engine says of the container of the web
// service: its id, when it started and whether it runs (zero when there is
// none).
type engineContainer struct {
	ID, StartedAt string
	Running       bool
}

func webContainer(t *testing.T, cli *client.Client) engineContainer {
	t.Helper()
	ids := deviceContainers(t, cli, "service/web")
	if len(ids) == 0 {
		return engineContainer{}
	}
	require.Len(t, ids, 1)
	in, err := cli.ContainerInspect(context.Background(), ids[0], client.ContainerInspectOptions{})
	require.NoError(t, err)
	return engineContainer{ID: in.Container.ID, StartedAt: in.Container.State.StartedAt, Running: in.Container.State.Running}
}

// deviceContainers lists the ids of cam-017's containers on the engine,
// of every service or of the one resource names.
func deviceContainers(t *testing.T, cli *client.Client, resource ...string) []string {
	t.Helper()
	f := make(client.Filters).Add("label", container.LabelDevice+"=cam-017")
	for _, r := range resource {
		f = f.Add("label", container.LabelResource+"="+r)
	}
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	require.NoError(t, err)
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

// stateChanges lists what differs between two snapshots of a stateDir:
// "+ path", "- path" and "~ path", relative to dir, sorted.
func stateChanges(dir string, before, after map[string]string) []string {
	var out []string
	for p, v := range after {
		rel, _ := filepath.Rel(dir, p)
		if w, ok := before[p]; !ok {
			out = append(out, "+ "+rel)
		} else if w != v {
			out = append(out, "~ "+rel)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, "- "+rel)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(a[2:], b[2:]) })
	return out
}

// The previous release converges a node; this tend, run on the same root
// and stateDir, plans nothing, applies nothing, keeps the worker's process
// and the web container, and prunes the file and the service the old tend
// created once a commit drops them.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	host := testdocker.Host(t) // skips, as every container test does, where no engine can run
	prev := oldtend.Previous(t)
	oldBin := oldtend.Build(t, prev)
	oldVersion, errOut, code := runTend(t, oldBin, "version")
	require.Equal(t, 0, code, errOut)
	newVersion, errOut, code := runTend(t, tendBin, "version")
	require.Equal(t, 0, code, errOut)
	which := fmt.Sprintf("upgrade from %s: old %s; new %s", prev.Name, strings.TrimSpace(oldVersion), strings.TrimSpace(newVersion))
	t.Log(which)

	reg := testoci.Start(t)
	reg.PushFiles(t, "models/detector:v1", map[string][]byte{"model.onnx": []byte("weights v1"), "labels.txt": []byte("person\n")})
	img := testdocker.PushProgram(t, reg.Host, "infer/web", testdocker.SvcDir())
	prog := svcProg(t)
	cli, err := client.New(client.WithHost(host))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })

	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-017/device.yaml", upgradeDevice(reg.Ref("models/detector:v1"), img.Tag, prog, true))
	repo.Commit("files, a model, a process and a container service")
	config := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(config, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nruntime: {docker: {host: "+host+"}}\n"), 0o644))
	n := newNode(t, repo.Dir(), "--allow-path", "/opt/models", "--insecure-registry", reg.Host, "--config", config)
	t.Cleanup(func() {
		for _, id := range deviceContainers(t, cli) {
			_, _ = cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
		}
		stopServices(t, n.state)
	})

	out, errOut, code := n.tendAt(oldBin, "apply")
	require.Equal(t, 0, code, "%s\n%s%s", which, out, errOut)
	worker := servicePID(t, n.state, "worker")
	require.NotZero(t, worker, "%s: the old tend started no worker", which)
	web := webContainer(t, cli)
	require.True(t, web.Running, "%s: the old tend started no web container: %+v", which, web)
	require.Equal(t, "person\n", n.read("etc/infer/labels.txt"))
	require.Equal(t, "weights v1", n.read("opt/models/detector/model.onnx"))
	// What the old tend left, to compare with what the new one makes of it.
	root, oldState := treeSnapshot(n.root), treeSnapshot(n.state)

	out, errOut, code = n.tend("plan", "--detailed-exitcode")
	require.Equal(t, 0, code, "%s: the new tend has something to do\n%s%s", which, out, errOut)
	require.Contains(t, out, "Plan: 0 to add, 0 to change, 0 to delete, 5 unchanged.", which)

	out, errOut, code = n.tend("apply")
	require.Equal(t, 0, code, "%s\n%s%s", which, out, errOut)
	require.Contains(t, out, "Plan: 0 to add, 0 to change, 0 to delete, 5 unchanged.", which)
	require.Equal(t, worker, servicePID(t, n.state, "worker"), "%s: the worker was restarted", which)
	require.Equal(t, web, webContainer(t, cli), "%s: the web container was replaced or restarted", which)
	require.Equal(t, root, treeSnapshot(n.root), "%s: files or the model changed", which)
	changes := stateChanges(n.state, oldState, treeSnapshot(n.state))
	t.Logf("stateDir after the new tend's first apply:\n%s", strings.Join(changes, "\n"))
	// The new tend migrated the stateDir to its format, and the copy of
	// the old files went with the apply that succeeded.
	oldFormat := stateFormat(t, oldState[filepath.Join(n.state, statedir.FormatFile)])
	require.Equal(t, statedir.Format, stateFormat(t, readFile(t, filepath.Join(n.state, statedir.FormatFile))), which)
	if oldFormat < statedir.Format {
		require.Contains(t, changes, "~ inventory.json", which)
		for _, f := range []string{"inventory.json", "services/worker/service.json", "services/worker/0.json", "models/detector/model.json"} {
			require.True(t, strings.HasPrefix(readFile(t, filepath.Join(n.state, f)), "{\n  \"formatVersion\": \""+strconv.Itoa(statedir.Format)+"\""),
				"%s: %s is not in format %d", which, f, statedir.Format)
		}
	}
	require.NoDirExists(t, statedir.Dir(n.state).FormatCopy(oldFormat), which)

	// The agent, as after a package upgrade and systemctl restart: it
	// adopts both services as they run.
	a := startAgent(t, n, "--schedule", "@every 1s")
	eventually(t, func() bool { return strings.Contains(a.logs(), "msg=reconciled") })
	require.Contains(t, a.logs(), fmt.Sprintf(`msg="service adopted" resource=service/worker replica=0 pid=%d`, worker), which)
	require.Contains(t, a.logs(), `msg="service adopted" resource=service/web replica=0 `, which)
	require.Equal(t, worker, servicePID(t, n.state, "worker"), "%s: the agent restarted the worker", which)
	require.Equal(t, web, webContainer(t, cli), "%s: the agent replaced or restarted the web container", which)

	repo.WriteFile("devices/cam-017/device.yaml", upgradeDevice(reg.Ref("models/detector:v1"), img.Tag, prog, false))
	second := repo.Commit("drop labels.txt and the worker")
	eventually(t, func() bool { return a.status()["appliedRevision"] == "HEAD@sha1:"+second })
	require.Contains(t, a.logs(), `msg=deleted resource=service/worker action=delete reason="no longer declared"`, which)
	require.Contains(t, a.logs(), `msg=deleted resource=file/etc/infer/labels.txt action=delete reason="no longer declared"`, which)
	require.NoFileExists(t, filepath.Join(n.root, "etc/infer/labels.txt"), which)
	require.False(t, processAlive(worker), "%s: the worker (pid %d) still runs", which, worker)
	inventory, err := os.ReadFile(filepath.Join(n.state, "inventory.json"))
	require.NoError(t, err)
	require.NotContains(t, string(inventory), "file/etc/infer/labels.txt", which)
	require.NotContains(t, string(inventory), "service/worker", which)
	require.Equal(t, "threshold: 0.4\n", n.read("etc/infer/config.yaml"), which)
	require.Equal(t, "weights v1", n.read("opt/models/detector/model.onnx"), which)

	// The agent stops cleanly and leaves the service it keeps running.
	a.stop()
	require.Equal(t, web, webContainer(t, cli), "%s: the web container stopped with the agent", which)
}

// stateFormat is the format a stateDir's format.json holding marker says,
// 1 for none.
func stateFormat(t *testing.T, marker string) int {
	t.Helper()
	if marker == "" {
		return 1
	}
	var m statedir.Marker
	require.NoError(t, json.Unmarshal([]byte(marker), &m))
	n, err := strconv.Atoi(m.FormatVersion)
	require.NoError(t, err)
	return n
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}
