package container_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcontainer "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/tend-dev/tend/agent"
	"github.com/tend-dev/tend/applier/service/container"
	"github.com/tend-dev/tend/internal/testkit/testdocker"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/internal/testkit/testserver"
	"github.com/tend-dev/tend/manifest"
)

// BenchmarkKillToReplacement measures what a supervisor does when a
// container's main process dies: from SIGKILL to the pid, through Wait
// returning its status, to Start returning with a replacement running
// (the image already on the engine). p50_ms is the median of the
// iterations, p50_wait_ms that of the part until Wait returned.
func BenchmarkKillToReplacement(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	in := e.instance("bench", "web")
	p, err := e.rt.Run(ctx, in)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.rt.Stop(ctx, p, 0) })
	var took, waited []time.Duration
	for b.Loop() {
		done := e.waitAsync(p)
		t0 := time.Now()
		if err := unix.Kill(p.PID, unix.SIGKILL); err != nil {
			b.Fatal(err)
		}
		if res := <-done; res.err != nil || res.st.Signal != "killed" {
			b.Fatalf("wait: %v (%s)", res.err, res.st)
		}
		waited = append(waited, time.Since(t0))
		p, err = e.rt.Run(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
		if !e.rt.Alive(p) {
			b.Fatal("replacement not running")
		}
	}
	b.ReportMetric(p50ms(took), "p50_ms")
	b.ReportMetric(p50ms(waited), "p50_wait_ms")
}

// p50ms is the median of d in milliseconds.
func p50ms(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)/2].Microseconds()) / 1000
}

// BenchmarkNoopTick10Containers: an agent's tick that finds its ten
// container services as declared (one image), watched by its supervisor.
// It reports the engine API calls and registry requests of each tick,
// counted by a proxy in front of the engine's socket, and tend's CPU time.
func BenchmarkNoopTick10Containers(b *testing.B) {
	host := testdocker.Host(b)
	reg := testoci.Start(b)
	var registry atomic.Int64
	reg.Use(func(http.ResponseWriter, *http.Request) bool { registry.Add(1); return false })
	img := testdocker.PushProgram(b, reg.Host, "infer/svc", testdocker.SvcDir())
	proxy, calls := countingEngine(b, strings.TrimPrefix(host, "unix://"))

	r := benchAgent(b, "bench", 10, img.Tag, reg.Host, "unix://"+proxy, host)
	ctx := b.Context()
	engine0, registry0, cpu0 := calls.Load(), registry.Load(), cpuTime(b)
	for b.Loop() {
		res, err := r.Apply(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if !res.Plan.Empty() {
			b.Fatalf("not a no-op tick: %v", res.Plan.Actions)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(calls.Load()-engine0)/n, "engine_calls/tick")
	b.ReportMetric(float64(registry.Load()-registry0)/n, "registry_requests/tick")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/n, "cpu_ms/tick")
}

// countingEngine serves the engine at socket on a socket of its own,
// counting each API call (the long-lived waits among them).
func countingEngine(b testing.TB, socket string) (string, *atomic.Int64) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "e.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	var calls atomic.Int64
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "engine" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}},
		FlushInterval: -1,
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return path, &calls
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAgentKillToReplacement: an agent's supervisor watching
// container services; each iteration kills the main process of a service
// of its own (so no restart backoff has grown) and waits until it runs
// again (p50_ms, the supervisor's first-restart delay included) and
// serves again: its port accepts a connection (p50_serving_ms). Side by
// side, in the same iteration, the reference: a container of the same
// image on the same engine under the engine's own policy, as `docker run
// --restart=always --network host IMAGE -listen ADDR` makes it, killed
// the same way, one per iteration too (p50_docker_serving_ms); ratio is
// tend's median over Docker's.
func BenchmarkAgentKillToReplacement(b *testing.B) {
	host := testdocker.Host(b)
	reg := testoci.Start(b)
	img := testdocker.PushProgram(b, reg.Host, "infer/svc", testdocker.SvcDir())
	ports := make([]string, 2*b.N)
	for i := range ports {
		ports[i] = testserver.FreeAddr(b)
	}
	// One service per kill: none has a restart backoff grown.
	r := benchAgent(b, "killbench", b.N, img.Tag, reg.Host, host, host, func(i int) string {
		return "      args: [-listen, \"" + ports[i] + "\"]\n"
	})
	sup := r.Supervisor
	restarted := make(chan string, 1)
	sup.OnRestart(func(service string) {
		select { // fn must not block
		case restarted <- service:
		default:
		}
	})
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	docker := make([]int, b.N) // the main pid of each reference container
	for i := range b.N {
		docker[i] = runAlways(b, cli, img.Ref, fmt.Sprintf("killbench-always-%d", i), ports[b.N+i])
		testserver.WaitServing(b, ports[b.N+i], false)
	}
	var took, serving, dockerServing []time.Duration
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("web%d", i)
		states, err := sup.Instances(name)
		if err != nil || len(states) != 1 || !states[0].Alive {
			b.Fatalf("%s not running: %v %+v", name, err, states)
		}
		testserver.WaitServing(b, ports[i], false)
		t0 := time.Now()
		if err := unix.Kill(states[0].PID, unix.SIGKILL); err != nil {
			b.Fatal(err)
		}
		testserver.WaitServing(b, ports[i], true)
		serving = append(serving, time.Since(t0))
		<-restarted // the supervisor started and recorded it (before it served, or after)
		took = append(took, time.Since(t0))
		if states, err := sup.Instances(name); err != nil || len(states) != 1 || !states[0].Alive {
			b.Fatalf("%s: not running again: %v %+v", name, err, states)
		}

		t0 = time.Now()
		if err := unix.Kill(docker[i], unix.SIGKILL); err != nil {
			b.Fatal(err)
		}
		testserver.WaitServing(b, ports[b.N+i], true)
		dockerServing = append(dockerServing, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(p50ms(took), "p50_ms")
	b.ReportMetric(p50ms(serving), "p50_serving_ms")
	b.ReportMetric(p50ms(dockerServing), "p50_docker_serving_ms")
	b.ReportMetric(p50ms(serving)/p50ms(dockerServing), "ratio")
}

// runAlways runs image with the engine's restart policy always on the
// host's network, serving on addr, as `docker run -d --restart=always
// --network host IMAGE -listen ADDR` does, and returns its main pid. It
// is removed when the benchmark ends.
func runAlways(b *testing.B, cli *client.Client, image, name, addr string) int {
	b.Helper()
	ctx := context.Background()
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name,
		Config:     &mcontainer.Config{Image: image, Cmd: []string{"-listen", addr}},
		HostConfig: &mcontainer.HostConfig{NetworkMode: "host", RestartPolicy: mcontainer.RestartPolicy{Name: mcontainer.RestartPolicyAlways}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}) })
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		b.Fatal(err)
	}
	in, err := cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return in.Container.State.Pid
}

// benchAgent is device's reconciler with its services, n containers of
// image (from registry), applied, on the engine at engine, its supervisor
// watching them; the containers are removed from the engine at host when
// the benchmark ends. extra, when given, adds lines to service i's
// declaration.
func benchAgent(b *testing.B, device string, n int, image, registry, engine, host string, extra ...func(i int) string) *agent.Reconciler {
	repo := testgit.NewRepo(b)
	var decl strings.Builder
	for i := range n {
		fmt.Fprintf(&decl, "    - name: web%d\n      image: %s\n", i, image)
		for _, e := range extra {
			decl.WriteString(e(i))
		}
	}
	repo.WriteFile("devices/"+device+"/d.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: "+device+"}\nspec:\n  services:\n"+decl.String())
	repo.Commit("services")
	dir := b.TempDir()
	c := &manifest.AgentConfig{Device: device, Source: manifest.SourceConfig{URL: repo.Dir(), Path: "devices/{device}"},
		StateDir: filepath.Join(dir, "state"), Root: filepath.Join(dir, "root"),
		Registries: manifest.Registries{Insecure: []string{registry}}, Runtime: manifest.RuntimeConfig{Docker: manifest.DockerRuntime{Host: engine}}}
	c.SetDefaults("")
	if err := os.MkdirAll(c.Root, 0o755); err != nil {
		b.Fatal(err)
	}
	sup := agent.NewSupervisor(c, nil)
	if err := sup.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sup.Stop()
		cli, err := client.New(client.WithHost(host))
		if err != nil {
			return
		}
		defer cli.Close()
		list, _ := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
			Filters: make(client.Filters).Add("label", container.LabelDevice+"="+device)})
		for _, c := range list.Items {
			_, _ = cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
		}
	})
	r := &agent.Reconciler{Config: c, Supervisor: sup}
	if _, err := r.Apply(b.Context()); err != nil {
		b.Fatal(err)
	}
	return r
}
