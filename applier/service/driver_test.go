package service_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/process"
	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/internal/testkit/testnode"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/planner"
)

// testAllow is the allowed path of the tests without models; modelAllow
// that of the tests with models, which are placed under it.
const (
	testAllow  = "/etc/infer"
	modelAllow = "/opt/models"
)

// waitFor is how long a test waits for an event before it fails: a guard
// against a hang, not a bound on how fast anything must be.
const waitFor = 30 * time.Second

var (
	svcProgDir  string // where testdata/svcprog is built; removed by TestMain
	svcProgOnce sync.Once
	svcProg     string
	svcProgErr  error
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tend-svcprog-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	svcProgDir = dir
	return m.Run()
}

// serviceProgram builds testdata/svcprog once per test binary.
func serviceProgram(t testing.TB) string {
	t.Helper()
	svcProgOnce.Do(func() {
		svcProg = filepath.Join(svcProgDir, "svcprog")
		out, err := exec.Command("go", "build", "-o", svcProg, "./testdata/svcprog").CombinedOutput()
		if err != nil {
			svcProgErr = fmt.Errorf("build svcprog: %v\n%s", err, out)
		}
	})
	require.NoError(t, svcProgErr)
	return svcProg
}

// node is a test node whose services run as real processes, under a
// supervisor whose log the test reads.
type node struct {
	*testnode.Node
	t   *testing.T
	log *supervisorLog
}

// newNode returns a node whose managed paths may lie under allow; with
// watch, its supervisor watches (as the agent's does).
func newNode(t *testing.T, watch bool, allow ...string) *node {
	t.Helper()
	n := &node{Node: testnode.New(t, allow...), t: t, log: &supervisorLog{}}
	n.newSupervisor(watch)
	t.Cleanup(func() {
		n.Sup.Stop()
		n.stopAll()
	})
	return n
}

// newSupervisor replaces the node's supervisor, as a restart of tend does:
// the one before it must be stopped.
func (n *node) newSupervisor(watch bool) {
	n.t.Helper()
	n.Sup = service.NewSupervisor(n.StateDir, service.RuntimesOf(process.New(testnode.CgroupParent, nil)), slog.New(n.log))
	if watch {
		require.NoError(n.t, n.Sup.Start(context.Background()))
	}
}

// stopAll kills every instance a test left running.
func (n *node) stopAll() {
	pids, _ := n.Sup.RecordedPIDs()
	for _, pid := range pids {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// declare returns the node's device declaring services.
func (n *node) declare(services ...manifest.Service) *manifest.Device {
	return n.Declare(manifest.DeviceSpec{Services: services})
}

// tick renders, plans and applies dev at rev.
func (n *node) tick(dev *manifest.Device, rev string) (*planner.Changeset, applier.Result, error) {
	n.t.Helper()
	tk, err := n.Plan(dev, rev)
	if err != nil {
		return nil, applier.Result{}, err
	}
	res, err := tk.Apply(context.Background())
	return tk.Plan, res, err
}

// apply runs one tick of services that must succeed.
func (n *node) apply(services ...manifest.Service) *planner.Changeset {
	n.t.Helper()
	cs, _ := n.Reconcile(n.declare(services...), "rev")
	return cs
}

// records returns the instance records of a service.
func (n *node) records(name string) []service.Record {
	n.t.Helper()
	recs, err := n.Sup.Records(name)
	require.NoError(n.t, err)
	return recs
}

// instances returns what the supervisor reports of a service's instances.
func (n *node) instances(name string) []service.InstanceState {
	n.t.Helper()
	insts, err := n.Sup.Instances(name)
	require.NoError(n.t, err)
	return insts
}

// pids returns the pid of each recorded instance that runs, by replica.
func (n *node) pids(name string) map[int]int {
	n.t.Helper()
	out := map[int]int{}
	for _, r := range n.records(name) {
		if r.Alive {
			out[r.Replica] = r.PID
		}
	}
	return out
}

func replicas(n int) *int { return &n }

func (n *node) service(name string, count int, args ...string) manifest.Service {
	return manifest.Service{Name: name, Command: append([]string{serviceProgram(n.t)}, args...), Replicas: replicas(count),
		Env: map[string]string{"INDEX": "${replica}"}, StopTimeout: manifest.Duration(2 * time.Second)}
}

// supervisorLog keeps what a supervisor logs.
type supervisorLog struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *supervisorLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *supervisorLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

func (l *supervisorLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *supervisorLog) WithGroup(string) slog.Handler      { return l }

// restart is a restart the supervisor scheduled after an exit.
type restart struct {
	Crashes int           // the quick exits in a row, this one included
	Delay   time.Duration // the backoff before the restart
}

// restarts lists the restarts the supervisor scheduled for service name,
// in order.
func (l *supervisorLog) restarts(t testing.TB, name string) []restart {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []restart
	for _, r := range l.recs {
		if r.Message != "service exited; restarting" {
			continue
		}
		var resource string
		var rs restart
		var err error
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "resource":
				resource = a.Value.String()
			case "crashes":
				rs.Crashes = int(a.Value.Int64())
			case "in":
				rs.Delay, err = time.ParseDuration(a.Value.String())
			}
			return true
		})
		require.NoError(t, err)
		if resource == planner.ServiceID(name) {
			out = append(out, rs)
		}
	}
	return out
}

func reasons(cs *planner.Changeset) string {
	var b strings.Builder
	for _, a := range cs.Actions {
		b.WriteString(a.String() + "\n")
	}
	return b.String()
}

// eventually waits for ok, checking every 20ms; it fails only when ok
// never holds within waitFor.
func eventually(t *testing.T, ok func() bool, msg string) {
	t.Helper()
	require.Eventually(t, ok, waitFor, 20*time.Millisecond, msg)
}

func TestServiceReplicasScaleOnlyTheDifference(t *testing.T) {
	n := newNode(t, false, testAllow)
	n.AllowEmpty = true
	svc := n.service("infer", 2)
	cs := n.apply(svc)
	require.Equal(t, "+ service/infer (declared)", cs.Actions[0].String())
	first := n.pids("infer")
	require.Len(t, first, 2)
	eventually(t, func() bool {
		b, _ := os.ReadFile(service.LogFile(n.StateDir, "infer", 1))
		return strings.Contains(string(b), `"INDEX=1"`)
	}, "replica 1 did not print INDEX=1")

	cs = n.apply(svc)
	require.True(t, cs.Empty(), reasons(cs))

	svc.Replicas = replicas(4)
	cs = n.apply(svc)
	require.Equal(t, "~ service/infer (update: replicas changed in Git)", cs.Actions[0].String())
	now := n.pids("infer")
	require.Len(t, now, 4)
	require.Equal(t, first[0], now[0], "replica 0 was restarted by a scale-up")
	require.Equal(t, first[1], now[1], "replica 1 was restarted by a scale-up")

	svc.Replicas = replicas(1)
	n.apply(svc)
	now = n.pids("infer")
	require.Equal(t, map[int]int{0: first[0]}, now)

	svc.Replicas = replicas(0)
	n.apply(svc)
	require.Empty(t, n.pids("infer"))
	cs = n.apply(svc)
	require.True(t, cs.Empty(), reasons(cs))
}

func TestServiceKilledIsDriftWithoutAgent(t *testing.T) {
	n := newNode(t, false, testAllow)
	n.AllowEmpty = true
	svc := n.service("infer", 2)
	n.apply(svc)
	pids := n.pids("infer")
	require.NoError(t, syscall.Kill(pids[1], syscall.SIGKILL))
	eventually(t, func() bool { return len(n.pids("infer")) == 1 }, "the killed replica still runs")

	cs := n.apply(svc)
	require.Len(t, cs.Actions, 1)
	require.True(t, cs.Actions[0].IsDrift())
	require.Equal(t, "drift: 1 of 2 replicas not running (replica 1 gone)", cs.Actions[0].Reason)
	now := n.pids("infer")
	require.Len(t, now, 2)
	require.Equal(t, pids[0], now[0], "the healthy replica was touched")
}

// The first restart after an exit waits the first step of the backoff
// (100ms, as Docker's restart policy), not a later one. What the test asserts is the wait the
// supervisor chose, not how long the restart took on a loaded machine.
func TestServiceSupervisorRestartsAtOnce(t *testing.T) {
	n := newNode(t, true, testAllow)
	n.AllowEmpty = true
	svc := n.service("infer", 1)
	n.apply(svc)
	pid := n.pids("infer")[0]
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	eventually(t, func() bool { p := n.pids("infer")[0]; return p != 0 && p != pid }, "the killed instance was not restarted")

	require.Equal(t, 100*time.Millisecond, service.RestartDelay(1), "the first step of the backoff")
	require.Equal(t, []restart{{Crashes: 1, Delay: service.RestartDelay(1)}}, n.log.restarts(t, "infer"),
		"the first restart comes after the first step of the backoff")
	recs := n.records("infer")
	require.Equal(t, 1, recs[0].Restarts)
	require.Equal(t, 1, recs[0].Crashes, "one quick exit in a row")
	require.Contains(t, recs[0].LastExit, "killed")
	cs := n.apply(svc)
	require.True(t, cs.Empty(), "a restarted service is as declared: %s", reasons(cs))
}

// A service that keeps exiting is restarted after a wait that doubles
// with each quick exit in a row, and shows as crash-looping. The backoff
// is a small one, so that the loop is short; the waits are the ones the
// supervisor chose, read from its log, not measured.
func TestServiceCrashLoopBacksOff(t *testing.T) {
	policy := backoff.Exponential{Initial: 10 * time.Millisecond, Max: time.Minute}
	service.SetRestartBackoff(t, policy)
	n := newNode(t, true, testAllow)
	n.AllowEmpty = true
	// It runs until crash exists, and from then on exits at once.
	crash := filepath.Join(t.TempDir(), "crash")
	svc := n.service("crash", 1, "-exit", "3", "-exit-when", crash)
	n.apply(svc)
	require.NoError(t, os.WriteFile(crash, nil, 0o644))

	var insts []service.InstanceState
	eventually(t, func() bool {
		insts = n.instances("crash")
		return insts[0].Restarts >= 3 && insts[0].CrashLoop
	}, "not restarted three times into a crash loop")
	require.Equal(t, "exit code 3", insts[0].LastExit)

	restarts := n.log.restarts(t, "crash")
	require.GreaterOrEqual(t, len(restarts), insts[0].Restarts, "a restart that was not scheduled")
	for i, r := range restarts {
		require.Equal(t, i+1, r.Crashes, "exit %d was not counted as a quick exit in a row", i+1)
		require.Equal(t, policy.Delay(i+1), r.Delay, "restart %d", i+1)
		if i > 0 {
			require.Equal(t, 2*restarts[i-1].Delay, r.Delay, "the wait before restart %d did not double", i+1)
		}
	}
}

// A service that exits as its restart policy lets it stays down: once its
// exit is recorded, no restart is scheduled.
func TestServiceOnFailureAndNever(t *testing.T) {
	n := newNode(t, true, testAllow)
	n.AllowEmpty = true
	clean := n.service("clean", 1, "-exit", "0")
	clean.Restart = manifest.RestartOnFailure
	never := n.service("never", 1, "-exit", "1")
	never.Restart = manifest.RestartNever
	n.apply(clean, never)
	for name, exit := range map[string]string{"clean": "exit code 0", "never": "exit code 1"} {
		var insts []service.InstanceState
		eventually(t, func() bool {
			insts = n.instances(name)
			return insts[0].LastExit != ""
		}, "the exit of "+name+" was not recorded")
		// exited records the exit and whether a restart is pending in one
		// step: once the exit shows, so would a scheduled restart.
		require.True(t, insts[0].Done, name)
		require.False(t, insts[0].Pending, "%s: a restart was scheduled", name)
		require.False(t, insts[0].Alive, name)
		require.Equal(t, exit, insts[0].LastExit, name)
		require.Empty(t, n.log.restarts(t, name), name)
		recs := n.records(name)
		require.Zero(t, recs[0].Restarts, name)
	}
}

func TestServiceAdoptedAcrossSupervisors(t *testing.T) {
	n := newNode(t, true, testAllow)
	n.AllowEmpty = true
	svcs := []manifest.Service{n.service("a", 2), n.service("b", 1)}
	n.apply(svcs...)
	before := map[string]map[int]int{"a": n.pids("a"), "b": n.pids("b")}

	// The agent restarts: a new supervisor adopts what runs.
	n.Sup.Stop()
	n.newSupervisor(true)
	cs := n.apply(svcs...)
	require.True(t, cs.Empty(), reasons(cs))
	require.Equal(t, before, map[string]map[int]int{"a": n.pids("a"), "b": n.pids("b")}, "adoption restarted a service")

	// An adopted instance that exits is restarted too.
	require.NoError(t, syscall.Kill(before["b"][0], syscall.SIGKILL))
	eventually(t, func() bool { p := n.pids("b")[0]; return p != 0 && p != before["b"][0] }, "the adopted instance was not restarted")
}

func TestServiceRemovedIsStopped(t *testing.T) {
	n := newNode(t, false, testAllow)
	n.AllowEmpty = true
	n.apply(n.service("infer", 2))
	pids := n.pids("infer")
	cs := n.apply()
	require.Equal(t, "- service/infer (no longer declared)", cs.Actions[0].String())
	for _, pid := range pids {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH)
	}
	_, err := os.Stat(filepath.Join(n.StateDir, "services", "infer"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.FileExists(t, service.LogFile(n.StateDir, "infer", 0), "logs outlive the service")
}

func TestServiceHealth(t *testing.T) {
	n := newNode(t, false, testAllow)
	n.AllowEmpty = true
	addr := freePort(t)
	svc := n.service("web", 1, "-listen", addr)
	svc.Health = &manifest.Health{HTTP: "http://" + addr + "/healthz", StartupGrace: manifest.Duration(5 * time.Second)}
	n.apply(svc)

	bad := n.service("bad", 1)
	bad.Health = &manifest.Health{TCP: addr[:strings.LastIndexByte(addr, ':')] + ":1", StartupGrace: manifest.Duration(time.Second)}
	_, _, err := n.tick(n.declare(svc, bad), "rev")
	require.ErrorIs(t, err, service.ErrUnhealthy)
	require.ErrorContains(t, err, "service/bad did not become healthy: replica 0: unhealthy: not healthy after")
}

func TestServiceBadInput(t *testing.T) {
	n := newNode(t, false, testAllow)
	n.AllowEmpty = true
	missing := manifest.Service{Name: "missing", Command: []string{"/opt/nope/server"}}
	_, _, err := n.tick(n.declare(missing), "rev")
	require.ErrorContains(t, err, `"/opt/nope/server" not found`)
	require.Empty(t, n.pids("missing"))

	user := n.service("user", 1)
	user.User = "no-such-user-here"
	_, _, err = n.tick(n.declare(user), "rev")
	require.ErrorContains(t, err, `user "no-such-user-here" does not exist`)
	require.Empty(t, n.pids("user"))
}

// modelNode is a node whose models are pulled from an in-process
// registry and placed under modelAllow.
type modelNode struct {
	*node
	reg *testoci.Registry
}

func newModelNode(t *testing.T, watch bool) *modelNode {
	t.Helper()
	m := &modelNode{node: newNode(t, watch, modelAllow), reg: testoci.Start(t)}
	m.Models.Registry = transport.Options{Insecure: []string{m.reg.Host}}
	m.Models.KeepVersions = 2
	return m
}

func (m *modelNode) model(name, repoTag string) manifest.Model {
	return manifest.Model{Name: name, Ref: m.reg.Ref(repoTag), Path: modelAllow + "/" + name}
}

// read returns the content of a file through the model's stable path.
func (m *modelNode) read(name, file string) string {
	m.t.Helper()
	b, err := os.ReadFile(m.Path(filepath.Join(modelAllow, name, file)))
	require.NoError(m.t, err)
	return string(b)
}

// target is where the model's stable path points.
func (m *modelNode) target(name string) string {
	m.t.Helper()
	p, err := os.Readlink(m.Path(filepath.Join(modelAllow, name)))
	require.NoError(m.t, err)
	return p
}

var v1Files = map[string][]byte{
	"model.onnx":  []byte(strings.Repeat("weights-v1 ", 5000)),
	"labels.txt":  []byte("person\ncar\n"),
	"config.json": []byte(`{"threshold":0.4}`),
}

func TestServiceRestartsOnModelChange(t *testing.T) {
	m := newModelNode(t, false)
	m.reg.PushFiles(t, "models/detector:v8", v1Files)
	model := m.model("detector", "models/detector:v8")
	svc := m.service("infer", 1)
	svc.Command = append(svc.Command, "${model:detector}/model.onnx")
	tick := func() *planner.Changeset {
		cs, _ := m.Reconcile(m.Declare(manifest.DeviceSpec{Models: []manifest.Model{model}, Services: []manifest.Service{svc}}), "rev")
		return cs
	}
	tick()
	pid := m.pids("infer")[0]
	b, err := os.ReadFile(service.LogFile(m.StateDir, "infer", 0))
	require.NoError(t, err)
	require.Contains(t, string(b), m.Path(filepath.Join(modelAllow, "detector"))+"/model.onnx")

	cs := tick()
	require.True(t, cs.Empty(), reasons(cs))
	require.Equal(t, pid, m.pids("infer")[0])

	d1 := m.reg.PushFiles(t, "models/detector:v7", map[string][]byte{"model.onnx": []byte("old")})
	_ = d1
	v2 := m.reg.PushFiles(t, "models/detector:v8", map[string][]byte{"model.onnx": []byte("new weights")})
	cs = tick()
	require.Len(t, cs.Actions, 2, reasons(cs))
	require.Equal(t, "model/detector", cs.Actions[0].Resource)
	require.Equal(t, planner.Restart, cs.Actions[1].Type)
	require.Contains(t, cs.Actions[1].Reason, "restart: model/detector sha256:")
	require.Contains(t, cs.Actions[1].Reason, "→ "+v2[:19])
	require.NotEqual(t, pid, m.pids("infer")[0], "the service was not restarted onto the new model")
}

// A service that does not become healthy after an update rolls the whole
// update back: the model link, the file and the service spec run as
// before, and the inventory keeps the old revision.
func TestServiceUnhealthyUpdateRollsBack(t *testing.T) {
	m := newModelNode(t, false)
	m.reg.PushFiles(t, "models/detector:v1", map[string][]byte{"model.onnx": []byte("v1")})
	m.reg.PushFiles(t, "models/detector:v2", map[string][]byte{"model.onnx": []byte("v2")})
	addr := freePort(t)

	tick := func(rev, tag, config string, svcArgs ...string) (*planner.Changeset, applier.Result, error) {
		svc := m.service("web", 1, svcArgs...)
		svc.RestartOn = []string{"model:detector"}
		svc.Health = &manifest.Health{HTTP: "http://" + addr + "/healthz", StartupGrace: manifest.Duration(2 * time.Second)}
		return m.tick(m.Declare(manifest.DeviceSpec{
			Models:   []manifest.Model{m.model("detector", "models/detector:"+tag)},
			Files:    []manifest.File{{Path: modelAllow + "/web.conf", Content: config}},
			Services: []manifest.Service{svc},
		}), rev)
	}
	_, _, err := tick("rev1", "v1", "port: 1\n", "-listen", addr)
	require.NoError(t, err)
	link := m.target("detector")
	pid := m.pids("web")[0]

	// rev2: a new model, a new config, and a server that exits at once.
	_, res, err := tick("rev2", "v2", "port: 2\n", "-exit", "1")
	var rb *applier.RollbackError
	require.ErrorAs(t, err, &rb)
	require.ErrorIs(t, err, service.ErrUnhealthy)
	require.Equal(t, "service/web", rb.Failed)
	require.Equal(t, "rev2", rb.Revision)
	require.ElementsMatch(t, []string{"model/detector", "file/opt/models/web.conf", "service/web"}, res.RolledBack)
	require.NoError(t, rb.Undo)

	require.Equal(t, link, m.target("detector"), "the model link was not put back")
	require.Equal(t, "v1", m.read("detector", "model.onnx"))
	b, err := os.ReadFile(m.Path(filepath.Join(modelAllow, "web.conf")))
	require.NoError(t, err)
	require.Equal(t, "port: 1\n", string(b))
	now := m.pids("web")[0]
	require.NotZero(t, now)
	require.NotEqual(t, pid, now, "the service was not restarted onto the old version")
	recs := m.records("web")
	require.Contains(t, recs[0].Command, "-listen")
	inv, err := applier.LoadInventory(m.StateDir)
	require.NoError(t, err)
	require.Equal(t, "rev1", inv.Revision)

	// The old version is what the inventory describes: rev1 is a no-op.
	cs, _, err := tick("rev1", "v1", "port: 1\n", "-listen", addr)
	require.NoError(t, err)
	require.True(t, cs.Empty(), reasons(cs))
}

// A service that allocates past its memory limit is killed by the kernel,
// and tend says so (a real cgroup: v2, or v1 as on this machine).
func TestServiceMemoryLimit(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") == "" {
		t.Skip("cgroup limits need root (CI runs as root)")
	}
	n := newNode(t, true, testAllow)
	n.AllowEmpty = true
	svc := n.service("hog", 1, "-alloc", "256")
	svc.Restart = manifest.RestartNever
	svc.Resources = &manifest.Resources{Memory: "64Mi", CPU: "500m"}
	n.apply(svc)
	var last string
	eventually(t, func() bool {
		last = n.records("hog")[0].LastExit
		return last != ""
	}, "the exit of hog was not recorded")
	require.Contains(t, last, "out of memory: limit 64Mi")
	require.Empty(t, n.records("hog")[0].Limits, "limits were not applied")
	// restart: never — it stays down, and that is not drift.
	cs, _, err := n.tick(n.declare(svc), "rev")
	require.NoError(t, err)
	require.True(t, cs.Empty(), reasons(cs))

	// Under always, a service killed while no agent watched is drift. (It
	// is killed here by hand: one killed by the kernel before its start
	// settled would fail the apply, and when the kernel kills it is a race.)
	svc = n.service("hog", 1)
	svc.Restart = manifest.RestartAlways
	svc.Resources = &manifest.Resources{Memory: "64Mi", CPU: "500m"}
	n.Sup.Stop()
	n.newSupervisor(false)
	n.apply(svc)
	pids := n.pids("hog")
	require.Len(t, pids, 1)
	require.NoError(t, syscall.Kill(pids[0], syscall.SIGKILL))
	eventually(t, func() bool { return len(n.pids("hog")) == 0 }, "hog was not killed")
	cs, _, err = n.tick(n.declare(svc), "rev")
	require.NoError(t, err)
	require.Len(t, cs.Actions, 1)
	require.Equal(t, "drift: 1 of 1 replicas not running (replica 0 gone)", cs.Actions[0].Reason)
}

// A service that keeps exiting at once, with no health probe, fails its
// start once its startup grace is spent: the update is rolled back, not
// left crash-looping.
func TestServiceExitingAtOnceRollsBack(t *testing.T) {
	service.SetStartupGrace(t, time.Second)
	n := newNode(t, false, testAllow)
	n.AllowEmpty = true
	good := n.service("web", 2)
	n.apply(good)
	pids := n.pids("web")
	bad := n.service("web", 2, "-exit", "1")
	_, _, err := n.tick(n.declare(bad), "rev")
	var rb *applier.RollbackError
	require.ErrorAs(t, err, &rb)
	require.ErrorContains(t, err, "exited within 300ms of its start")
	require.Regexp(t, `\(started [2-9] times within startupGrace 1s\)`, err.Error(), "not retried within its grace")
	now := n.pids("web")
	require.Len(t, now, 2)
	require.NotEqual(t, pids[0], now[0], "replica 0 runs the old spec again")
	require.Equal(t, pids[1], now[1], "replica 1, never reached by the update, was restarted by the rollback")
}

// While the agent watches, a service that turns unhealthy after its start
// (failureThreshold failures in a row) is restarted. It turns unhealthy
// when the test says so, not after a delay its start could outlast.
func TestServiceUnhealthyAtRunTimeIsRestarted(t *testing.T) {
	n := newNode(t, true, testAllow)
	n.AllowEmpty = true
	addr := freePort(t)
	sick := filepath.Join(t.TempDir(), "sick")
	svc := n.service("web", 1, "-listen", addr, "-unhealthy-when", sick)
	svc.Health = &manifest.Health{HTTP: "http://" + addr + "/healthz", Interval: manifest.Duration(200 * time.Millisecond),
		FailureThreshold: 2, StartupGrace: manifest.Duration(5 * time.Second)}
	n.apply(svc)
	pid := n.pids("web")[0]
	require.NoError(t, os.WriteFile(sick, nil, 0o644))
	eventually(t, func() bool { p := n.pids("web")[0]; return p != 0 && p != pid }, "the unhealthy instance was not restarted")
	require.GreaterOrEqual(t, n.records("web")[0].Restarts, 1)
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// A service that runs as another user reads its model through
// ${model:NAME}: the stateDir lets it pass.
func TestServiceAsAnotherUserReadsItsModel(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") == "" {
		t.Skip("switching users needs root (CI runs as root)")
	}
	m := newModelNode(t, false)
	// As tend would make them: the state and root folders, in a temp
	// folder others may pass through.
	base := filepath.Dir(m.StateDir)
	for _, d := range []string{filepath.Dir(base), base, m.Root} {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	require.NoError(t, os.MkdirAll(m.StateDir, 0o700))
	require.NoError(t, os.Chmod(m.StateDir, 0o700)) // an older tend made it so
	m.reg.PushFiles(t, "models/detector:v8", v1Files)
	svc := manifest.Service{Name: "reader", User: "nobody", Restart: manifest.RestartNever,
		Command: []string{"/bin/cat", "${model:detector}/labels.txt"}}
	m.Reconcile(m.Declare(manifest.DeviceSpec{Models: []manifest.Model{m.model("detector", "models/detector:v8")},
		Services: []manifest.Service{svc}}), "rev")
	eventually(t, func() bool {
		b, _ := os.ReadFile(service.LogFile(m.StateDir, "reader", 0))
		return strings.Contains(string(b), string(v1Files["labels.txt"]))
	}, "reader did not print the model's labels")
}

// A start killed in its first moments is retried under the restart policy
// within its startup grace: neither an update nor a first deploy fails
// for it (and nothing is rolled back).
func TestServiceKilledAtStartIsRetried(t *testing.T) {
	for _, watch := range []bool{false, true} {
		t.Run(fmt.Sprintf("watch=%v", watch), func(t *testing.T) {
			n := newNode(t, watch, testAllow)
			n.AllowEmpty = true
			first := filepath.Join(t.TempDir(), "first")
			n.apply(n.service("web", 1, "-crash-first", first))
			require.FileExists(t, first, "the first start was not killed")
			require.Len(t, n.pids("web"), 1, "not running after its first start was killed")

			again := filepath.Join(t.TempDir(), "again")
			cs, _, err := n.tick(n.declare(n.service("web", 1, "-crash-first", again)), "rev2")
			require.NoError(t, err, "an update whose first start was killed failed")
			require.Len(t, cs.Actions, 1)
			require.FileExists(t, again)
			require.Len(t, n.pids("web"), 1)
			require.Contains(t, n.records("web")[0].Command, again, "rolled back")
		})
	}
}

// A first deploy whose service never becomes healthy is not rolled back
// into nothing: the error says so, the commit is not held against the
// node (no RollbackError), and the agent's supervisor keeps restarting
// the service under its policy, with backoff.
func TestFirstDeployIsNotRolledBack(t *testing.T) {
	service.SetStartupGrace(t, time.Second)
	n := newNode(t, true, testAllow)
	n.AllowEmpty = true
	files := manifest.File{Path: testAllow + "/web.conf", Content: "port: 1\n"}
	bad := n.service("web", 1, "-exit", "1")
	_, res, err := n.tick(n.Declare(manifest.DeviceSpec{Files: []manifest.File{files}, Services: []manifest.Service{bad}}), "rev1")
	require.ErrorContains(t, err, "not rolled back: no revision was applied on this node before")
	var rb *applier.RollbackError
	require.False(t, errors.As(err, &rb), "rolled back: %v", err)
	require.Empty(t, res.RolledBack)
	b, err := os.ReadFile(n.Path(testAllow + "/web.conf"))
	require.NoError(t, err, "what applied before the service is kept")
	require.Equal(t, "port: 1\n", string(b))
	restarts := n.records("web")[0].Restarts
	eventually(t, func() bool { return n.records("web")[0].Restarts > restarts+1 }, "the supervisor does not restart the failed service")
	inv, err := applier.LoadInventory(n.StateDir)
	require.NoError(t, err)
	require.Empty(t, inv.Revision, "a revision that failed is recorded as applied")
	require.True(t, inv.Resources[planner.ServiceID("web")].Created, "the service tend left running is not recorded as tend's")

	// Dropped from Git, it is stopped: it is tend's.
	cs, _, err := n.tick(n.Declare(manifest.DeviceSpec{Files: []manifest.File{files}}), "rev2")
	require.NoError(t, err)
	require.Contains(t, reasons(cs), "- service/web")
	require.Empty(t, n.pids("web"))
}

// Every restart is heard (tend_service_restarts_total counts them): the
// watcher's after an exit, and a restart the plan makes; a first start is
// not one.
func TestServiceRestartsAreHeard(t *testing.T) {
	n := newNode(t, true, testAllow)
	n.AllowEmpty = true
	var mu sync.Mutex
	heard := map[string]int{}
	n.Sup.OnRestart(func(name string) { mu.Lock(); heard[name]++; mu.Unlock() })
	count := func() int { mu.Lock(); defer mu.Unlock(); return heard["infer"] }
	svc := n.service("infer", 1)
	n.apply(svc)
	require.Zero(t, count(), "a first start is no restart")
	pid := n.pids("infer")[0]
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	eventually(t, func() bool { return count() == 1 }, "the watcher's restart was not heard")
	n.apply(n.service("infer", 1, "-listen", freePort(t)))
	require.Equal(t, 2, count(), "the update's restart was not heard")
}

// A limit changed by hand on a running replica is drift: the plan names it,
// the next tick writes the declared limit back in place (same pid), and
// the tick after that has nothing to do.
func TestServiceLimitDriftRevertedInPlace(t *testing.T) {
	if os.Geteuid() != 0 && os.Getenv("CI") == "" {
		t.Skip("cgroup limits need root (CI runs as root)")
	}
	n := newNode(t, true, testAllow)
	svc := n.service("infer", 1)
	svc.Resources = &manifest.Resources{Memory: "64Mi"}
	n.apply(svc)
	require.Empty(t, n.records("infer")[0].Limits, "limits were not applied")
	pid := n.pids("infer")[0]

	// Where the replica's memory limit is, from the kernel.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	require.NoError(t, err)
	var limitFile string
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		switch {
		case len(parts) == 3 && parts[0] == "0" && parts[1] == "":
			limitFile = filepath.Join("/sys/fs/cgroup", parts[2], "memory.max")
		case len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "memory"):
			limitFile = filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes")
		}
		if limitFile != "" && strings.Contains(parts[2], testnode.CgroupParent) {
			break
		}
	}
	require.FileExists(t, limitFile)
	require.NoError(t, os.WriteFile(limitFile, []byte(strconv.Itoa(256<<20)), 0))

	cs, res, err := n.tick(n.declare(svc), "rev")
	require.NoError(t, err)
	require.Len(t, cs.Actions, 1, reasons(cs))
	require.Equal(t, "drift: replica 0: memory limit 256Mi on node, 64Mi declared (rewritten in place)", cs.Actions[0].Reason)
	require.Equal(t, planner.Drift("replica 0: memory limit 256Mi on node, 64Mi declared (rewritten in place)"), cs.Actions[0].Drift)
	require.Equal(t, cs.Actions, res.Applied)
	got, err := os.ReadFile(limitFile)
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(64<<20), strings.TrimSpace(string(got)))
	require.Equal(t, pid, n.pids("infer")[0], "rewritten in place, not restarted")

	cs, _, err = n.tick(n.declare(svc), "rev")
	require.NoError(t, err)
	require.True(t, cs.Empty(), reasons(cs))
}

// Verify judges again what an interrupted apply started (see
// applier.Verifier): a running instance in place, with a full startup
// grace; one that is gone, started again from its record; one of another
// spec, not at all.
func TestServiceVerify(t *testing.T) {
	n := newNode(t, false, testAllow)
	n.AllowEmpty = true
	ready := filepath.Join(t.TempDir(), "ready")
	require.NoError(t, os.WriteFile(ready, nil, 0o644))
	svc := n.service("web", 1)
	svc.Health = &manifest.Health{Exec: []string{"/bin/sh", "-c", "test -e " + ready},
		Interval: manifest.Duration(100 * time.Millisecond), StartupGrace: manifest.Duration(time.Second)}
	n.apply(svc)
	hash := n.instances("web")[0].SpecHash
	d := service.NewDriver(n.StateDir, n.Sup, service.DriverOptions{})
	ctx := context.Background()

	t.Run("running and healthy: judged in place", func(t *testing.T) {
		before := n.pids("web")
		require.NoError(t, d.Verify(ctx, "service/web", hash))
		require.Equal(t, before, n.pids("web"), "a healthy instance was restarted")
	})
	t.Run("another spec: not judged", func(t *testing.T) {
		require.NoError(t, os.Remove(ready))
		require.NoError(t, d.Verify(ctx, "service/web", "another"))
		require.NoError(t, os.WriteFile(ready, nil, 0o644))
	})
	t.Run("gone: started again and judged", func(t *testing.T) {
		pid := n.pids("web")[0]
		require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
		eventually(t, func() bool { return len(n.pids("web")) == 0 }, "the killed instance still runs")
		require.NoError(t, d.Verify(ctx, "service/web", hash))
		now := n.pids("web")
		require.Len(t, now, 1)
		require.NotEqual(t, pid, now[0])
	})
	t.Run("unhealthy", func(t *testing.T) {
		require.NoError(t, os.Remove(ready))
		err := d.Verify(ctx, "service/web", hash)
		require.ErrorIs(t, err, service.ErrUnhealthy)
		require.ErrorContains(t, err, "replica 0: unhealthy: not healthy after")
	})
}
