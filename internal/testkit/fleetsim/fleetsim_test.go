package fleetsim_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/robfig/cron/v3"

	"github.com/tend-dev/tend/agent"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testmeter"
	"github.com/tend-dev/tend/internal/testkit/testmqtt"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/notify"
	_ "github.com/tend-dev/tend/notify/mqtt" // the MQTT transport, as cmd/tend registers it
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/ocisource"
)

var (
	agents   = flag.Int("fleetsim.agents", 100, "agents in the fleet")
	interval = flag.Duration("fleetsim.interval", 10*time.Second, "each agent's polling interval (with jitter of as much again)")
	only     = flag.String("fleetsim.modes", "", "scenarios to run, separated by ; (default: all)")
	profile  = flag.Bool("fleetsim.profile", false, "one profile for every device instead of a folder per device (path and OCI scenarios)")
)

// scenario is one way a fleet reads its desired state.
type scenario struct {
	name   string
	notify bool // agents subscribe to an MQTT broker; tend notify follows each change
	// setup makes the fleet source for n devices and returns the agent
	// config of device i, a function that commits a change for every
	// device (and publishes or notifies as the scenario does) and returns
	// the revision the agents must reach, and the server's meter.
	setup func(b *testing.B, n int) (config func(i int) *manifest.AgentConfig, change func() string, m *meter)
}

// meter counts what the fleet source's server did: requests and bytes
// sent (testmeter), and CPU time (of the server process, or of the CGI
// children it ran).
type meter struct {
	testmeter.Meter
	cpu func() time.Duration
}

func deviceName(i int) string { return fmt.Sprintf("dev-%04d", i) }

// writeFleet writes generation gen of the fleet: a document per device,
// or with -fleetsim.profile one profile that selects every device.
func writeFleet(repo *testgit.Repo, n int, gen string) {
	if *profile {
		repo.WriteFile("profiles/all.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: all}\nspec:\n  selector: {}\n"+
			"  files:\n    - {path: /etc/infer/config.yaml, content: \"generation: "+gen+"\"}\n")
		return
	}
	for i := range n {
		repo.WriteFile("devices/"+deviceName(i)+"/device.yaml", deviceDoc(i, gen))
	}
}

// fleetPath is the folder a device reads in the path and OCI scenarios.
func fleetPath() string {
	if *profile {
		return "profiles"
	}
	return "devices/{device}"
}

func deviceDoc(i int, gen string) string {
	return fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: %s}\nspec:\n  files:\n    - {path: /etc/infer/config.yaml, content: \"generation: %s\"}\n", deviceName(i), gen)
}

// gitPath is one branch, a folder per device (source.path devices/{device}).
func gitPath(b *testing.B, n int) (func(int) *manifest.AgentConfig, func() string, *meter) {
	repo := testgit.NewRepo(b)
	writeFleet(repo, n, "1")
	repo.Commit("generation 1")
	m := &meter{cpu: testmeter.ChildrenCPU}
	url := serveGit(b, repo, m)
	config := func(i int) *manifest.AgentConfig {
		return agentConfig(b, i, manifest.SourceConfig{URL: url, Ref: "main", Path: fleetPath()})
	}
	gen := 1
	change := func() string {
		gen++
		writeFleet(repo, n, fmt.Sprint(gen))
		return "main@sha1:" + repo.Commit(fmt.Sprintf("generation %d", gen))
	}
	return config, change, m
}

// gitBranches is a branch per device (source.ref {device}), each holding
// only that device's document: every poll downloads the advertisement of
// every branch.
func gitBranches(b *testing.B, n int) (func(int) *manifest.AgentConfig, func() string, *meter) {
	repo := testgit.NewRepo(b)
	repo.WriteFile("README.md", "one branch per device\n")
	repo.Commit("root")
	commitAll := func(gen string) map[int]string {
		heads := make(map[int]string, n)
		for i := range n {
			repo.Checkout(deviceName(i))
			repo.WriteFile("devices/"+deviceName(i)+"/device.yaml", deviceDoc(i, gen))
			heads[i] = repo.Commit("generation " + gen)
		}
		repo.Checkout("main")
		return heads
	}
	for i := range n {
		repo.Branch(deviceName(i))
		repo.Checkout("main")
	}
	commitAll("1")
	m := &meter{cpu: testmeter.ChildrenCPU}
	url := serveGit(b, repo, m)
	config := func(i int) *manifest.AgentConfig {
		return agentConfig(b, i, manifest.SourceConfig{URL: url, Ref: "{device}", Path: "devices/{device}"})
	}
	gen := 1
	change := func() string {
		gen++
		heads := commitAll(fmt.Sprint(gen))
		return heads[0] // each device has its own; applied() compares per device
	}
	return config, change, m
}

// serveGit serves repo with the real git http-backend, through m.
// ociArtifact is the fleet repo published as an OCI artifact on Debian's
// docker-registry (a process of its own, behind a counting proxy); the
// agents HEAD its tag.
func ociArtifact(b *testing.B, n int) (func(int) *manifest.AgentConfig, func() string, *meter) {
	repo := testgit.NewRepo(b)
	writeFleet(repo, n, "1")
	repo.Commit("generation 1")
	registry, pid := testoci.StartDistributionProcess(b)
	m := &meter{cpu: func() time.Duration {
		d, err := testmeter.ProcessCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}}
	target, err := url.Parse("http://" + registry)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler(httputil.NewSingleHostReverseProxy(target)))
	b.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	artifact := "oci://" + host + "/fleet:main"
	publish := func() string {
		g, err := git.PlainOpen(repo.Dir())
		if err != nil {
			b.Fatal(err)
		}
		p, err := ocisource.Publish(context.Background(), g, "main", artifact, ocisource.PublishOptions{Registry: transport.Options{Insecure: []string{host}}})
		if err != nil {
			b.Fatal(err)
		}
		return p.Revision
	}
	publish()
	config := func(i int) *manifest.AgentConfig {
		c := agentConfig(b, i, manifest.SourceConfig{URL: artifact, Path: fleetPath()})
		c.Registries.Insecure = []string{host}
		return c
	}
	gen := 1
	change := func() string {
		gen++
		writeFleet(repo, n, fmt.Sprint(gen))
		repo.Commit(fmt.Sprintf("generation %d", gen))
		return publish()
	}
	return config, change, m
}

func serveGit(b *testing.B, repo *testgit.Repo, m *meter) string {
	srv := httptest.NewServer(m.Handler(testgit.HTTPHandler(b, filepath.Dir(repo.Dir()))))
	b.Cleanup(srv.Close)
	return repo.URL(srv.URL)
}

func agentConfig(b *testing.B, i int, src manifest.SourceConfig) *manifest.AgentConfig {
	dir := filepath.Join(b.TempDir(), deviceName(i))
	c := &manifest.AgentConfig{Device: deviceName(i), Source: src, StateDir: filepath.Join(dir, "state"),
		Root: filepath.Join(dir, "root"), AllowPaths: []string{"/etc/infer"}, Listen: "off"}
	c.SetDefaults("")
	if err := os.MkdirAll(c.Root, 0o755); err != nil {
		b.Fatal(err)
	}
	return c
}

// fleet is N running agents and when each applied what.
type fleet struct {
	mu      sync.Mutex
	polls   int
	applied map[string]map[string]time.Time // device → revision → when applied
	loops   []*agent.Loop
	ticked  chan struct{} // has a value after a tick since it was last read
}

// await waits until done, checked at each tick, or fails at deadline.
func (f *fleet) await(b *testing.B, deadline time.Time, done func() (bool, string)) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		f.mu.Lock()
		ok, why := done()
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-f.ticked:
		case <-timer.C:
			b.Fatal(why)
		}
	}
}

func (f *fleet) tick(device string) func(*agent.Result, error) {
	return func(r *agent.Result, err error) {
		defer func() {
			select {
			case f.ticked <- struct{}{}:
			default:
			}
		}()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.polls++
		if err != nil || r == nil || r.Snapshot == nil || len(r.Applied) == 0 {
			return
		}
		rev := r.Snapshot.Revision.String()
		if f.applied[device] == nil {
			f.applied[device] = map[string]time.Time{}
		}
		if _, ok := f.applied[device][rev]; !ok {
			f.applied[device][rev] = time.Now()
		}
	}
}

// BenchmarkFleetSim runs each scenario once: a quiet window of polling (per
// poll: server requests, bytes and CPU), then a change committed for every
// device and the time until 50%, 99% and 100% of the agents applied it.
// make fleet-sim runs it; -fleetsim.agents, -fleetsim.interval and
// -fleetsim.modes tune it.
func BenchmarkFleetSim(b *testing.B) {
	var scenarios []scenario
	for _, notify := range []bool{false, true} {
		suffix := ""
		if notify {
			suffix = " + MQTT notify"
		}
		scenarios = append(scenarios,
			scenario{"git http-backend, path per device" + suffix, notify, gitPath},
			scenario{"git http-backend, branch per device" + suffix, notify, gitBranches},
			scenario{"OCI artifact on docker-registry" + suffix, notify, ociArtifact})
	}
	var rows []string
	for _, sc := range scenarios {
		if *only != "" && !slices.Contains(strings.Split(*only, ";"), sc.name) {
			continue
		}
		b.Run(strings.NewReplacer(" ", "_", ",", "").Replace(sc.name), func(b *testing.B) {
			for b.Loop() {
				rows = append(rows, run(b, sc))
			}
		})
	}
	fmt.Printf("\n| scenario (%d agents; polls every %s + up to %s jitter, with notify every %s) | requests/poll | bytes/poll | server CPU/poll | change → 50%% | 99%% | 100%% applied |\n|---|---|---|---|---|---|---|\n",
		*agents, *interval, *interval, notifyInterval)
	for _, r := range rows {
		fmt.Println(r)
	}
}

// notifyInterval is the polling floor of agents that are notified: no
// poll falls in a run, so what applies a change is the notification.
const notifyInterval = 5 * time.Minute

func run(b *testing.B, sc scenario) string {
	n := *agents
	config, change, m := sc.setup(b, n)
	f := &fleet{applied: map[string]map[string]time.Time{}, ticked: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	every := *interval
	var broker *testmqtt.Broker
	var topic manifest.MQTTNotify
	if sc.notify {
		broker = testmqtt.Start(b, testmqtt.Options{})
		topic = manifest.MQTTNotify{URL: broker.URL, Topic: "tend/fleet/main"}
		every = notifyInterval
	}
	subscribed := &countHandler{message: "notify: subscribed", counted: make(chan struct{}, 1)}
	log := slog.New(subscribed)
	for i := range n {
		c := config(i)
		if sc.notify {
			c.Notify = &manifest.Notify{MQTT: &topic}
		}
		// The loop ticks at once (within the jitter), then on schedule.
		l := agent.NewLoop(&agent.Reconciler{Config: c, Logger: log}, agent.LoopOptions{Schedule: cron.Every(every), Jitter: *interval, OnTick: f.tick(c.Device)})
		if err := l.Start(ctx); err != nil {
			b.Fatal(err)
		}
		f.loops = append(f.loops, l)
	}
	defer func() {
		for _, l := range f.loops {
			_ = l.Stop()
		}
	}()
	// Every agent applies the first generation (and subscribes).
	waitAll(b, f, n, func(device string, revs map[string]time.Time) bool { return len(revs) > 0 })
	poll := "| – | – | – "
	if !sc.notify {
		// The quiet window: what each poll costs the server.
		f.mu.Lock()
		polls0 := f.polls
		f.mu.Unlock()
		req0, bytes0, cpu0 := m.Requests.Load(), m.Bytes.Load(), m.cpu()
		// The measurement window: two polls per agent.
		f.await(b, time.Now().Add(10**interval+time.Minute), func() (bool, string) {
			return f.polls-polls0 >= 2*n, fmt.Sprintf("%d polls of %d in the window", f.polls-polls0, 2*n)
		})
		f.mu.Lock()
		polls := f.polls - polls0
		f.mu.Unlock()
		perPoll := func(v int64) float64 { return float64(v) / float64(polls) }
		cpu := time.Duration(perPoll(int64(m.cpu() - cpu0)))
		poll = fmt.Sprintf("| %.1f | %.0f | %s ", perPoll(m.Requests.Load()-req0), perPoll(m.Bytes.Load()-bytes0), cpu.Round(10*time.Microsecond))
	} else {
		timer := time.NewTimer(time.Minute)
		defer timer.Stop()
		for subscribed.n.Load() < int64(n) {
			select {
			case <-subscribed.counted:
			case <-timer.C:
				b.Fatalf("%d of %d agents subscribed", subscribed.n.Load(), n)
			}
		}
	}

	// Time counts from the change (a commit, or the commits of every
	// branch, and the publish) or, notified, from the notification.
	t0 := time.Now()
	rev := change()
	if sc.notify {
		t0 = time.Now()
		if err := notify.Publish(ctx, topic, notify.Payload{Revision: rev}); err != nil {
			b.Fatal(err)
		}
	}
	waitAll(b, f, n, func(device string, revs map[string]time.Time) bool { return len(revs) > 1 })
	var took []time.Duration
	f.mu.Lock()
	for _, revs := range f.applied {
		var last time.Time
		for _, at := range revs {
			if at.After(last) {
				last = at
			}
		}
		took = append(took, last.Sub(t0))
	}
	f.mu.Unlock()
	slices.Sort(took)
	pct := func(p float64) time.Duration {
		return took[min(len(took)-1, int(float64(len(took))*p))].Round(10 * time.Millisecond)
	}
	return fmt.Sprintf("| %s %s| %s | %s | %s |", sc.name, poll, pct(0.5), pct(0.99), took[len(took)-1].Round(10*time.Millisecond))
}

// countHandler discards log records, counting those with one message.
type countHandler struct {
	message string
	n       atomic.Int64
	counted chan struct{} // has a value after a count since it was last read
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.message {
		h.n.Add(1)
		select {
		case h.counted <- struct{}{}:
		default:
		}
	}
	return nil
}

func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

// waitAll waits until every device's applied revisions satisfy ok.
func waitAll(b *testing.B, f *fleet, n int, ok func(string, map[string]time.Time) bool) {
	f.await(b, time.Now().Add(10**interval+time.Minute), func() (bool, string) {
		done := 0
		for i := range n {
			if ok(deviceName(i), f.applied[deviceName(i)]) {
				done++
			}
		}
		return done == n, fmt.Sprintf("%d of %d agents applied", done, n)
	})
}
