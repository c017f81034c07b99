package applier

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

var (
	svcProgOnce sync.Once
	svcProg     string
	svcProgErr  error
)

// serviceProgram builds testdata/svcprog once per test binary.
func serviceProgram(t testing.TB) string {
	t.Helper()
	svcProgOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tend-svcprog-")
		if err != nil {
			svcProgErr = err
			return
		}
		svcProg = filepath.Join(dir, "svcprog")
		out, err := exec.Command("go", "build", "-o", svcProg, "./testdata/svcprog").CombinedOutput()
		if err != nil {
			svcProgErr = fmt.Errorf("build svcprog: %v\n%s", err, out)
		}
	})
	require.NoError(t, svcProgErr)
	return svcProg
}

// serviceNode is a node whose services run as real processes.
type serviceNode struct {
	t        *testing.T
	root     string
	stateDir string
	sup      *Supervisor
}

func newServiceNode(t *testing.T, watch bool) *serviceNode {
	t.Helper()
	n := &serviceNode{t: t, root: t.TempDir(), stateDir: t.TempDir()}
	n.sup = NewSupervisor(n.stateDir, service.NewExec(CgroupParent, nil), nil)
	if watch {
		require.NoError(t, n.sup.Watch(context.Background()))
	}
	t.Cleanup(func() {
		n.sup.Close()
		n.stopAll()
	})
	return n
}

// stopAll kills every instance a test left running.
func (n *serviceNode) stopAll() {
	recs, _ := n.sup.records()
	for _, r := range recs {
		_ = syscall.Kill(-r.Proc.PID, syscall.SIGKILL)
	}
}

func (n *serviceNode) tick(services ...manifest.Service) (*planner.Changeset, error) {
	n.t.Helper()
	a, err := New(Config{Root: n.root, StateDir: n.stateDir, AllowPaths: []string{testAllow}, Supervisor: n.sup})
	require.NoError(n.t, err)
	dev := &manifest.Device{Metadata: manifest.Metadata{Name: "cam-1"}}
	dev.Spec.Services = services
	ctx := context.Background()
	d, err := a.Desired(ctx, dev, "rev")
	if err != nil {
		return nil, err
	}
	obs, err := a.Observe(ctx, d)
	require.NoError(n.t, err)
	cs, err := planner.Plan(d, obs, planner.Options{AllowEmpty: true})
	require.NoError(n.t, err)
	_, err = a.Apply(ctx, d, cs)
	return cs, err
}

func (n *serviceNode) apply(services ...manifest.Service) *planner.Changeset {
	n.t.Helper()
	cs, err := n.tick(services...)
	require.NoError(n.t, err)
	return cs
}

// pids returns the pid of each recorded instance, by replica.
func (n *serviceNode) pids(name string) map[int]int {
	n.t.Helper()
	recs, err := n.sup.serviceRecords(name)
	require.NoError(n.t, err)
	out := map[int]int{}
	for _, r := range recs {
		if n.sup.rt.Alive(r.Proc) {
			out[r.Instance.Replica] = r.Proc.PID
		}
	}
	return out
}

func replicas(n int) *int { return &n }

func (n *serviceNode) service(name string, count int, args ...string) manifest.Service {
	return manifest.Service{Name: name, Command: append([]string{serviceProgram(n.t)}, args...), Replicas: replicas(count),
		Env: map[string]string{"INDEX": "${replica}"}, StopTimeout: manifest.Duration(2 * time.Second)}
}

func TestServiceReplicasScaleOnlyTheDifference(t *testing.T) {
	n := newServiceNode(t, false)
	svc := n.service("infer", 2)
	cs := n.apply(svc)
	require.Equal(t, "+ service/infer (declared)", cs.Actions[0].String())
	first := n.pids("infer")
	require.Len(t, first, 2)
	eventually(t, func() bool {
		b, _ := os.ReadFile(LogFile(n.stateDir, "infer", 1))
		return strings.Contains(string(b), `"INDEX=1"`)
	})

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
	n := newServiceNode(t, false)
	svc := n.service("infer", 2)
	n.apply(svc)
	pids := n.pids("infer")
	require.NoError(t, syscall.Kill(pids[1], syscall.SIGKILL))
	eventually(t, func() bool { return len(n.pids("infer")) == 1 })

	cs := n.apply(svc)
	require.Len(t, cs.Actions, 1)
	require.True(t, cs.Actions[0].Drift)
	require.Equal(t, "drift: 1 of 2 replicas not running (replica 1 gone)", cs.Actions[0].Reason)
	now := n.pids("infer")
	require.Len(t, now, 2)
	require.Equal(t, pids[0], now[0], "the healthy replica was touched")
}

func TestServiceSupervisorRestartsAtOnce(t *testing.T) {
	n := newServiceNode(t, true)
	svc := n.service("infer", 1)
	n.apply(svc)
	pid := n.pids("infer")[0]
	killed := time.Now()
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	eventually(t, func() bool { p := n.pids("infer")[0]; return p != 0 && p != pid })
	require.Less(t, time.Since(killed), time.Second, "the first restart comes within a second")

	recs, err := n.sup.serviceRecords("infer")
	require.NoError(t, err)
	require.Equal(t, 1, recs[0].Restarts)
	require.Contains(t, recs[0].LastExit, "killed")
	cs := n.apply(svc)
	require.True(t, cs.Empty(), "a restarted service is as declared: %s", reasons(cs))
}

func TestServiceCrashLoopBacksOff(t *testing.T) {
	n := newServiceNode(t, true)
	svc := n.service("crash", 1, "-exit", "3", "-after", "400ms")
	n.apply(svc)
	time.Sleep(3 * time.Second)
	recs, err := n.sup.serviceRecords("crash")
	require.NoError(t, err)
	// Runs of 0.4 s with 0.2, 0.4 and 0.8 s of backoff between them fit
	// three restarts in 3 s: a busy loop would make hundreds.
	require.GreaterOrEqual(t, recs[0].Restarts, 2)
	require.LessOrEqual(t, recs[0].Restarts, 4)
	require.Equal(t, "exit code 3", recs[0].LastExit)
	insts, err := n.sup.Instances("crash")
	require.NoError(t, err)
	require.True(t, insts[0].CrashLoop)
}

func TestServiceOnFailureAndNever(t *testing.T) {
	n := newServiceNode(t, true)
	clean := n.service("clean", 1, "-exit", "0")
	clean.Restart = manifest.RestartOnFailure
	never := n.service("never", 1, "-exit", "1")
	never.Restart = manifest.RestartNever
	n.apply(clean, never)
	time.Sleep(time.Second)
	for _, name := range []string{"clean", "never"} {
		recs, err := n.sup.serviceRecords(name)
		require.NoError(t, err)
		require.Zero(t, recs[0].Restarts, name)
	}
}

func TestServiceAdoptedAcrossSupervisors(t *testing.T) {
	n := newServiceNode(t, true)
	svcs := []manifest.Service{n.service("a", 2), n.service("b", 1)}
	n.apply(svcs...)
	before := map[string]map[int]int{"a": n.pids("a"), "b": n.pids("b")}

	// The agent restarts: a new supervisor adopts what runs.
	n.sup.Close()
	n.sup = NewSupervisor(n.stateDir, service.NewExec(CgroupParent, nil), nil)
	require.NoError(t, n.sup.Watch(context.Background()))
	cs := n.apply(svcs...)
	require.True(t, cs.Empty(), reasons(cs))
	require.Equal(t, before, map[string]map[int]int{"a": n.pids("a"), "b": n.pids("b")}, "adoption restarted a service")

	// An adopted instance that exits is restarted too.
	require.NoError(t, syscall.Kill(before["b"][0], syscall.SIGKILL))
	eventually(t, func() bool { p := n.pids("b")[0]; return p != 0 && p != before["b"][0] })
}

func TestServiceRemovedIsStopped(t *testing.T) {
	n := newServiceNode(t, false)
	n.apply(n.service("infer", 2))
	pids := n.pids("infer")
	cs := n.apply()
	require.Equal(t, "- service/infer (no longer declared)", cs.Actions[0].String())
	for _, pid := range pids {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH)
	}
	_, err := os.Stat(filepath.Join(n.stateDir, "services", "infer"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.FileExists(t, LogFile(n.stateDir, "infer", 0), "logs outlive the service")
}

func TestServiceHealth(t *testing.T) {
	n := newServiceNode(t, false)
	addr := freePort(t)
	svc := n.service("web", 1, "-listen", addr)
	svc.Health = &manifest.Health{HTTP: "http://" + addr + "/healthz", StartupGrace: manifest.Duration(5 * time.Second)}
	n.apply(svc)

	bad := n.service("bad", 1)
	bad.Health = &manifest.Health{TCP: addr[:strings.LastIndexByte(addr, ':')] + ":1", StartupGrace: manifest.Duration(time.Second)}
	_, err := n.tick(svc, bad)
	require.ErrorIs(t, err, service.ErrUnhealthy)
	require.ErrorContains(t, err, "service/bad did not become healthy: replica 0: unhealthy: not healthy after")
}

func TestServiceBadInput(t *testing.T) {
	n := newServiceNode(t, false)
	missing := manifest.Service{Name: "missing", Command: []string{"/opt/nope/server"}}
	_, err := n.tick(missing)
	require.ErrorContains(t, err, `"/opt/nope/server" not found`)
	require.Empty(t, n.pids("missing"))

	user := n.service("user", 1)
	user.User = "no-such-user-here"
	_, err = n.tick(user)
	require.ErrorContains(t, err, `user "no-such-user-here" does not exist`)
	require.Empty(t, n.pids("user"))
}

func TestServiceRestartsOnModelChange(t *testing.T) {
	m := newModelNode(t)
	sn := newServiceNode(t, false)
	sn.root, sn.stateDir = m.root, m.stateDir
	sn.sup = NewSupervisor(m.stateDir, service.NewExec(CgroupParent, nil), nil)
	m.reg.PushFiles(t, "models/detector:v8", v1Files)
	model := m.model("detector", "models/detector:v8")
	svc := sn.service("infer", 1)
	svc.Command = append(svc.Command, "${model:detector}/model.onnx")
	tick := func() *planner.Changeset {
		a, err := New(Config{Root: m.root, StateDir: m.stateDir, AllowPaths: []string{modelAllow}, Models: m.opts, Supervisor: sn.sup})
		require.NoError(t, err)
		dev := &manifest.Device{Metadata: manifest.Metadata{Name: "cam-1"}}
		dev.Spec.Models, dev.Spec.Services = []manifest.Model{model}, []manifest.Service{svc}
		d, err := a.Desired(context.Background(), dev, "rev")
		require.NoError(t, err)
		obs, err := a.Observe(context.Background(), d)
		require.NoError(t, err)
		cs, err := planner.Plan(d, obs, planner.Options{})
		require.NoError(t, err)
		_, err = a.Apply(context.Background(), d, cs)
		require.NoError(t, err)
		return cs
	}
	tick()
	pid := sn.pids("infer")[0]
	b, err := os.ReadFile(LogFile(m.stateDir, "infer", 0))
	require.NoError(t, err)
	require.Contains(t, string(b), filepath.Join(m.root, modelAllow, "detector")+"/model.onnx")

	cs := tick()
	require.True(t, cs.Empty(), reasons(cs))
	require.Equal(t, pid, sn.pids("infer")[0])

	d1 := m.reg.PushFiles(t, "models/detector:v7", map[string][]byte{"model.onnx": []byte("old")})
	_ = d1
	v2 := m.reg.PushFiles(t, "models/detector:v8", map[string][]byte{"model.onnx": []byte("new weights")})
	cs = tick()
	require.Len(t, cs.Actions, 2, reasons(cs))
	require.Equal(t, "model/detector", cs.Actions[0].Resource)
	require.Equal(t, planner.Restart, cs.Actions[1].Type)
	require.Contains(t, cs.Actions[1].Reason, "restart: model/detector sha256:")
	require.Contains(t, cs.Actions[1].Reason, "→ "+v2[:19]+"…")
	require.NotEqual(t, pid, sn.pids("infer")[0], "the service was not restarted onto the new model")
}

// eventually waits up to 10 s for ok.
func eventually(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A service that does not become healthy after an update rolls the whole
// update back: the model link, the file and the service spec run as
// before, and the inventory keeps the old revision.
func TestServiceUnhealthyUpdateRollsBack(t *testing.T) {
	m := newModelNode(t)
	sn := newServiceNode(t, false)
	sn.root, sn.stateDir = m.root, m.stateDir
	sn.sup = NewSupervisor(m.stateDir, service.NewExec(CgroupParent, nil), nil)
	t.Cleanup(sn.stopAll)
	m.reg.PushFiles(t, "models/detector:v1", map[string][]byte{"model.onnx": []byte("v1")})
	m.reg.PushFiles(t, "models/detector:v2", map[string][]byte{"model.onnx": []byte("v2")})
	addr := freePort(t)

	tick := func(rev, tag, config string, svcArgs ...string) (*planner.Changeset, Result, error) {
		a, err := New(Config{Root: m.root, StateDir: m.stateDir, AllowPaths: []string{modelAllow}, Models: m.opts, Supervisor: sn.sup})
		require.NoError(t, err)
		svc := sn.service("web", 1, svcArgs...)
		svc.RestartOn = []string{"model:detector"}
		svc.Health = &manifest.Health{HTTP: "http://" + addr + "/healthz", StartupGrace: manifest.Duration(2 * time.Second)}
		dev := &manifest.Device{Metadata: manifest.Metadata{Name: "cam-1"}}
		dev.Spec.Models = []manifest.Model{m.model("detector", "models/detector:"+tag)}
		dev.Spec.Files = []manifest.File{{Path: modelAllow + "/web.conf", Content: config}}
		dev.Spec.Services = []manifest.Service{svc}
		d, err := a.Desired(context.Background(), dev, rev)
		require.NoError(t, err)
		obs, err := a.Observe(context.Background(), d)
		require.NoError(t, err)
		cs, err := planner.Plan(d, obs, planner.Options{})
		require.NoError(t, err)
		res, err := a.Apply(context.Background(), d, cs)
		return cs, res, err
	}
	_, _, err := tick("rev1", "v1", "port: 1\n", "-listen", addr)
	require.NoError(t, err)
	link := m.target("detector")
	pid := sn.pids("web")[0]

	// rev2: a new model, a new config, and a server that exits at once.
	_, res, err := tick("rev2", "v2", "port: 2\n", "-exit", "1")
	var rb *RollbackError
	require.ErrorAs(t, err, &rb)
	require.ErrorIs(t, err, service.ErrUnhealthy)
	require.Equal(t, "service/web", rb.Failed)
	require.Equal(t, "rev2", rb.Revision)
	require.ElementsMatch(t, []string{"model/detector", "file/opt/models/web.conf", "service/web"}, res.RolledBack)
	require.NoError(t, rb.Undo)

	require.Equal(t, link, m.target("detector"), "the model link was not put back")
	require.Equal(t, "v1", m.read("detector", "model.onnx"))
	b, err := os.ReadFile(filepath.Join(m.root, modelAllow, "web.conf"))
	require.NoError(t, err)
	require.Equal(t, "port: 1\n", string(b))
	now := sn.pids("web")[0]
	require.NotZero(t, now)
	require.NotEqual(t, pid, now, "the service was not restarted onto the old version")
	recs, err := sn.sup.serviceRecords("web")
	require.NoError(t, err)
	require.Contains(t, recs[0].Instance.Command, "-listen")
	inv, err := LoadInventory(m.stateDir)
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
	n := newServiceNode(t, true)
	svc := n.service("hog", 1, "-alloc", "256")
	svc.Restart = manifest.RestartNever
	svc.Resources = &manifest.Resources{Memory: "64Mi", CPU: "500m"}
	n.apply(svc)
	var last string
	eventually(t, func() bool {
		recs, err := n.sup.serviceRecords("hog")
		require.NoError(t, err)
		last = recs[0].LastExit
		return last != ""
	})
	require.Contains(t, last, "out of memory: limit 64Mi")
	recs, err := n.sup.serviceRecords("hog")
	require.NoError(t, err)
	require.Empty(t, recs[0].Proc.Limits, "limits were not applied")
	// restart: never — it stays down, and that is not drift.
	cs, err := n.tick(svc)
	require.NoError(t, err)
	require.True(t, cs.Empty(), reasons(cs))

	// Under always, a service killed while no agent watched is drift.
	svc.Restart = manifest.RestartAlways
	n.sup.Close()
	n.sup = NewSupervisor(n.stateDir, service.NewExec(CgroupParent, nil), nil)
	n.apply(svc)
	eventually(t, func() bool { return len(n.pids("hog")) == 0 })
	cs, err = n.tick(svc)
	require.NoError(t, err)
	require.Len(t, cs.Actions, 1)
	require.Equal(t, "drift: 1 of 1 replicas not running (replica 0 gone)", cs.Actions[0].Reason)
}

// A service that exits at once, with no health probe, fails its start:
// the update is rolled back, not left crash-looping.
func TestServiceExitingAtOnceRollsBack(t *testing.T) {
	n := newServiceNode(t, false)
	good := n.service("web", 2)
	n.apply(good)
	pids := n.pids("web")
	bad := n.service("web", 2, "-exit", "1")
	_, err := n.tick(bad)
	var rb *RollbackError
	require.ErrorAs(t, err, &rb)
	require.ErrorContains(t, err, "exited within 300ms of its start")
	now := n.pids("web")
	require.Len(t, now, 2)
	require.NotEqual(t, pids[0], now[0], "replica 0 runs the old spec again")
	require.Equal(t, pids[1], now[1], "replica 1, never reached by the update, was restarted by the rollback")
}

// While the agent watches, a service that turns unhealthy after its start
// (failureThreshold failures in a row) is restarted.
func TestServiceUnhealthyAtRunTimeIsRestarted(t *testing.T) {
	n := newServiceNode(t, true)
	addr := freePort(t)
	svc := n.service("web", 1, "-listen", addr, "-unhealthy-after", "700ms")
	svc.Health = &manifest.Health{HTTP: "http://" + addr + "/healthz", Interval: manifest.Duration(200 * time.Millisecond),
		FailureThreshold: 2, StartupGrace: manifest.Duration(5 * time.Second)}
	n.apply(svc)
	pid := n.pids("web")[0]
	eventually(t, func() bool { p := n.pids("web")[0]; return p != 0 && p != pid })
	recs, err := n.sup.serviceRecords("web")
	require.NoError(t, err)
	require.GreaterOrEqual(t, recs[0].Restarts, 1)
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
	m := newModelNode(t)
	sn := newServiceNode(t, false)
	// As tend would make them: the state and root folders, in a temp
	// folder others may pass through.
	base := filepath.Dir(m.stateDir)
	for _, d := range []string{filepath.Dir(base), base, m.root} {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	require.NoError(t, os.Chmod(m.stateDir, 0o700)) // an older tend made it so
	sn.root, sn.stateDir = m.root, m.stateDir
	sn.sup = NewSupervisor(m.stateDir, service.NewExec(CgroupParent, nil), nil)
	t.Cleanup(sn.stopAll)
	m.reg.PushFiles(t, "models/detector:v8", v1Files)
	svc := manifest.Service{Name: "reader", User: "nobody", Restart: manifest.RestartNever,
		Command: []string{"/bin/cat", "${model:detector}/labels.txt"}}
	a, err := New(Config{Root: m.root, StateDir: m.stateDir, AllowPaths: []string{modelAllow}, Models: m.opts, Supervisor: sn.sup})
	require.NoError(t, err)
	dev := &manifest.Device{Metadata: manifest.Metadata{Name: "cam-1"}}
	dev.Spec.Models, dev.Spec.Services = []manifest.Model{m.model("detector", "models/detector:v8")}, []manifest.Service{svc}
	d, err := a.Desired(context.Background(), dev, "rev")
	require.NoError(t, err)
	obs, err := a.Observe(context.Background(), d)
	require.NoError(t, err)
	cs, err := planner.Plan(d, obs, planner.Options{})
	require.NoError(t, err)
	_, err = a.Apply(context.Background(), d, cs)
	require.NoError(t, err)
	eventually(t, func() bool {
		b, _ := os.ReadFile(LogFile(m.stateDir, "reader", 0))
		return strings.Contains(string(b), string(v1Files["labels.txt"]))
	})
}
