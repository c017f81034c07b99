// Package testnode wires a node for tests: the applier handed the file,
// model and service drivers, over temp folders, so that orchestrator and
// driver tests run render → observe → plan → apply as the agent does. It
// is test support, not part of tend's flow.
package testnode

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/applier/file"
	"github.com/tend-dev/tend/applier/model"
	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/process"
	"github.com/tend-dev/tend/internal/confine"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// CgroupParent is the cgroup subtree the services of tests run under.
const CgroupParent = "tend"

// Node is a device's node under temp folders.
type Node struct {
	T        testing.TB
	Device   string
	Root     string
	StateDir string
	Allow    []string
	Models   model.Options
	// Sup runs services; New makes one that starts them detached.
	Sup        *service.Supervisor
	AllowEmpty bool
	// Logs holds what the applier and drivers logged, at debug, as JSON.
	Logs *bytes.Buffer
	// Now is the applier's clock; nil means time.Now.
	Now func() time.Time
}

// New returns a node for device cam-1 whose managed paths may lie under
// allow.
func New(t testing.TB, allow ...string) *Node {
	t.Helper()
	n := &Node{T: t, Device: "cam-1", Root: t.TempDir(), StateDir: filepath.Join(t.TempDir(), "state"), Allow: allow,
		Models: model.Options{KeepVersions: manifest.DefaultKeepVersions}, Logs: &bytes.Buffer{}}
	n.Sup = service.NewSupervisor(n.StateDir, service.RuntimesOf(process.New(CgroupParent, nil)), nil)
	t.Cleanup(n.Sup.Stop)
	return n
}

// Logger logs at debug into Logs.
func (n *Node) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(n.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Open makes the drivers and the applier of one tick, as the agent does.
func (n *Node) Open() (*applier.Applier, *model.Driver) {
	n.T.Helper()
	tree, err := confine.New(n.Root, n.Allow)
	require.NoError(n.T, err)
	models, err := model.New(n.StateDir, tree, n.Models, n.Logger())
	require.NoError(n.T, err)
	a, err := applier.New(applier.Config{Root: n.Root, StateDir: n.StateDir, Logger: n.Logger(), Now: n.Now},
		file.New(tree), models, service.NewDriver(n.StateDir, n.Sup, service.DriverOptions{Device: n.Device, Registry: n.Models.Registry}))
	require.NoError(n.T, err)
	return a, models
}

// Declare returns a device document for the node's device.
func (n *Node) Declare(spec manifest.DeviceSpec) *manifest.Device {
	return &manifest.Device{Metadata: manifest.Metadata{Name: n.Device}, Spec: spec}
}

// Tick is one tick's render, observation and plan.
type Tick struct {
	Applier  *applier.Applier
	Desired  *render.Desired
	Observed planner.Observed
	Plan     *planner.Changeset
}

// Plan renders dev at rev (models resolved by the model driver), observes
// the node and plans. A render error is returned; the rest must succeed.
func (n *Node) Plan(dev *manifest.Device, rev string) (*Tick, error) {
	n.T.Helper()
	ctx := context.Background()
	a, models := n.Open()
	d, err := render.Render(ctx, dev, rev, render.Options{Root: n.Root, StateDir: n.StateDir, AllowPaths: n.Allow,
		CheckAllowPaths: true, Resolver: models})
	if err != nil {
		return nil, err
	}
	obs, err := a.Observe(ctx, d)
	require.NoError(n.T, err)
	cs, err := planner.Plan(d.Desired, obs, planner.Options{AllowEmpty: n.AllowEmpty})
	require.NoError(n.T, err)
	return &Tick{Applier: a, Desired: d, Observed: obs, Plan: cs}, nil
}

// Apply applies the tick's plan.
func (t *Tick) Apply(ctx context.Context) (applier.Result, error) {
	return t.Applier.Apply(ctx, t.Desired, t.Plan)
}

// Reconcile plans dev at rev and applies the plan; every step must succeed
// and every action be applied.
func (n *Node) Reconcile(dev *manifest.Device, rev string) (*planner.Changeset, applier.Result) {
	n.T.Helper()
	t, err := n.Plan(dev, rev)
	require.NoError(n.T, err)
	res, err := t.Apply(context.Background())
	require.NoError(n.T, err)
	require.Nil(n.T, res.Failed)
	require.Equal(n.T, t.Plan.Actions, res.Applied)
	return t.Plan, res
}

// Path is where managed path p is on the node.
func (n *Node) Path(p string) string { return filepath.Join(n.Root, p) }

// StopServices kills the process group of every service instance recorded
// in stateDir: a one-shot apply, or an agent a test stopped, leaves them
// running, detached.
func StopServices(t testing.TB, stateDir string) {
	t.Helper()
	recs, _ := filepath.Glob(filepath.Join(stateDir, "services", "*", "[0-9]*.json"))
	for _, r := range recs {
		b, err := os.ReadFile(r)
		if err != nil {
			continue
		}
		var rec struct {
			Proc struct {
				PID int `json:"pid"`
			} `json:"proc"`
		}
		if json.Unmarshal(b, &rec) == nil && rec.Proc.PID > 0 {
			_ = syscall.Kill(-rec.Proc.PID, syscall.SIGKILL)
		}
	}
}
