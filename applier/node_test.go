package applier_test

import (
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/testkit/testfs"
	"github.com/tend-dev/tend/internal/testkit/testnode"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// testAllow is the allowed path of every test.
const testAllow = "/etc/infer"

// testNode is a node whose files go under root, for device cam-017.
type testNode struct {
	*testnode.Node
	root     string
	stateDir string
}

func newNode(t testing.TB) *testNode {
	t.Helper()
	n := testnode.New(t, testAllow)
	n.Device = "cam-017"
	n.Now = func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) }
	return &testNode{Node: n, root: n.Root, stateDir: n.StateDir}
}

func device(files ...manifest.File) *manifest.Device {
	return &manifest.Device{Metadata: manifest.Metadata{Name: "cam-017"}, Spec: manifest.DeviceSpec{Files: files}}
}

// plan renders dev at rev, observes the node and plans.
func (n *testNode) plan(t testing.TB, dev *manifest.Device, rev string) (*testnode.Tick, *planner.Changeset) {
	t.Helper()
	tick, err := n.Plan(dev, rev)
	require.NoError(t, err)
	return tick, tick.Plan
}

// reconcile plans and applies, and returns the plan.
func (n *testNode) reconcile(t testing.TB, dev *manifest.Device, rev string) *planner.Changeset {
	t.Helper()
	cs, _ := n.Reconcile(dev, rev)
	return cs
}

func (n *testNode) node(p string) string { return filepath.Join(n.root, p) }

func (n *testNode) inventory(t testing.TB) *applier.Inventory {
	t.Helper()
	inv, err := applier.LoadInventory(n.stateDir)
	require.NoError(t, err)
	return inv
}

func summary(cs *planner.Changeset) []string {
	var out []string
	for _, a := range cs.Actions {
		out = append(out, a.Type.Symbol()+" "+a.Resource)
	}
	return out
}

// fields is what a file resource's fields are when declared as f.
func fields(t testing.TB, f manifest.File) []planner.Field {
	t.Helper()
	d, err := render.Render(t.Context(), device(f), "rev", render.Options{})
	require.NoError(t, err)
	return d.Resources[0].Fields
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func tempFiles(t testing.TB, dir string) []string { return testfs.TempFiles(t, dir) }
func tree(t testing.TB, dir string) []string      { return testfs.Tree(t, dir) }
func perm(t testing.TB, p string) fs.FileMode     { return testfs.Perm(t, p) }
