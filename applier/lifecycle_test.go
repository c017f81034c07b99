package applier_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/internal/testkit/testnode"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

func TestPruneOnlyWhatTendCreated(t *testing.T) {
	x := manifest.File{Path: "/etc/infer/x", Content: "declared\n"}
	tests := []struct {
		name        string
		before      string // content on the node before tend; "" for none
		wantFirst   []string
		wantCreated bool
		// deletedOnNode removes x by hand after the first apply; the next
		// apply puts it back as drift and keeps its mark.
		deletedOnNode bool
	}{
		{name: "created by tend", wantFirst: []string{"+ file/etc/infer/x"}, wantCreated: true},
		{name: "created by tend, deleted on node", wantFirst: []string{"+ file/etc/infer/x"}, wantCreated: true,
			deletedOnNode: true},
		{name: "identical on node before tend", before: x.Content, wantFirst: nil},
		{name: "identical on node before tend, deleted on node", before: x.Content, wantFirst: nil,
			deletedOnNode: true},
		{name: "overwritten by tend", before: "found\n", wantFirst: []string{"~ file/etc/infer/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t)
			if tt.before != "" {
				require.NoError(t, os.MkdirAll(n.node("/etc/infer"), 0o755))
				require.NoError(t, os.WriteFile(n.node(x.Path), []byte(tt.before), 0o644))
			}
			cs := n.reconcile(t, device(config, x), "rev1")
			require.Equal(t, append([]string{"+ file/etc/infer/config.yaml"}, tt.wantFirst...), summary(cs))
			inv := n.inventory(t)
			require.True(t, inv.Resources[planner.FileID(config.Path)].Created)
			require.Equal(t, tt.wantCreated, inv.Resources[planner.FileID(x.Path)].Created)

			if tt.deletedOnNode {
				require.NoError(t, os.Remove(n.node(x.Path)))
				cs = n.reconcile(t, device(config, x), "rev1")
				require.Equal(t, []string{"+ file/etc/infer/x"}, summary(cs))
				require.Equal(t, "drift: deleted on node", cs.Actions[0].Reason)
				require.Equal(t, tt.wantCreated, n.inventory(t).Resources[planner.FileID(x.Path)].Created, "the mark is kept")
			}

			cs = n.reconcile(t, device(config), "rev2")
			if tt.wantCreated {
				require.Equal(t, []string{"- file/etc/infer/x"}, summary(cs))
				require.NoFileExists(t, n.node(x.Path))
			} else {
				require.Empty(t, summary(cs), "a file tend did not create is left on the node")
				got, err := os.ReadFile(n.node(x.Path))
				require.NoError(t, err)
				require.Equal(t, x.Content, string(got))
			}
			require.Equal(t, []string{planner.FileID(config.Path)}, sortedKeys(n.inventory(t).Resources))

			_, cs = n.plan(t, device(config), "rev2")
			require.True(t, cs.Empty(), "plan: %v", summary(cs))
		})
	}
}

func TestInventoryBoundToRootAndDevice(t *testing.T) {
	tests := []struct {
		name    string
		root    func(n *testNode) string // root of the second applier
		device  string                   // device of the second apply
		wantMsg func(n *testNode, root string) string
	}{
		{
			name:   "other root",
			root:   func(*testNode) string { return t.TempDir() },
			device: "cam-017",
			wantMsg: func(n *testNode, root string) string {
				return "stateDir " + n.stateDir + " holds the inventory of root " + n.root + ", but root is now " + root +
					": use one stateDir per root, or move " + statedir.Dir(n.stateDir).Inventory() +
					" aside to start over (tend then forgets, and never deletes, what it created before)"
			},
		},
		{
			name:   "other device",
			root:   func(n *testNode) string { return n.root },
			device: "cam-018",
			wantMsg: func(n *testNode, _ string) string {
				return "stateDir " + n.stateDir + " holds the inventory of device cam-017, but this is cam-018" +
					": use one stateDir per device, or move " + statedir.Dir(n.stateDir).Inventory() + " aside"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t)
			n.reconcile(t, device(config), "rev1")
			inv := n.inventory(t)
			require.Equal(t, n.root, inv.Root)
			require.Equal(t, "cam-017", inv.Device)

			root := tt.root(n)
			other := testnode.New(t, testAllow)
			other.Root, other.StateDir, other.Device = root, n.stateDir, tt.device
			a, _ := other.Open()
			d, err := render.Render(context.Background(), other.Declare(manifest.DeviceSpec{Files: []manifest.File{labels}}), "rev2",
				render.Options{Root: root, StateDir: n.stateDir})
			require.NoError(t, err)

			_, err = a.Observe(context.Background(), d)
			require.ErrorIs(t, err, applier.ErrInventoryMismatch)
			require.ErrorContains(t, err, tt.wantMsg(n, root))

			cs := &planner.Changeset{Actions: []planner.Action{{Type: planner.Create, Resource: planner.FileID(labels.Path), Kind: planner.KindFile, Reason: "declared"}}}
			_, err = a.Apply(context.Background(), d, cs)
			require.ErrorIs(t, err, applier.ErrInventoryMismatch, "Apply refuses it too")
			require.NoFileExists(t, filepath.Join(root, labels.Path))
			require.Equal(t, inv, n.inventory(t), "the inventory is untouched")
		})
	}

	t.Run("inventory without root or device is bound on the next apply", func(t *testing.T) {
		n := newNode(t)
		n.reconcile(t, device(config), "rev1")
		inv := n.inventory(t)
		inv.Root, inv.Device = "", ""
		require.NoError(t, inv.Save(n.stateDir))

		cs := n.reconcile(t, device(config), "rev1")
		require.True(t, cs.Empty(), "plan: %v", summary(cs))
		inv = n.inventory(t)
		require.Equal(t, n.root, inv.Root)
		require.Equal(t, "cam-017", inv.Device)
	})
}

func TestPathConflictConvergesInOneApply(t *testing.T) {
	tests := []struct {
		name     string
		from, to string
		wantPlan []string
	}{
		{"file replaced by folder", "/etc/infer/x", "/etc/infer/x/y",
			[]string{"- file/etc/infer/x", "+ file/etc/infer/x/y"}},
		{"file replaced by deep folder", "/etc/infer/x", "/etc/infer/x/y/z",
			[]string{"- file/etc/infer/x", "+ file/etc/infer/x/y/z"}},
		{"folder replaced by file", "/etc/infer/x/y", "/etc/infer/x",
			[]string{"- file/etc/infer/x/y", "~ file/etc/infer/x"}},
		{"deep folder replaced by file", "/etc/infer/x/y/z", "/etc/infer/x",
			[]string{"- file/etc/infer/x/y/z", "~ file/etc/infer/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t)
			from := manifest.File{Path: tt.from, Content: "from\n"}
			to := manifest.File{Path: tt.to, Content: "to\n"}
			n.reconcile(t, device(config, from), "rev1")

			cs := n.reconcile(t, device(config, to), "rev2")
			require.Equal(t, tt.wantPlan, summary(cs))
			got, err := os.ReadFile(n.node(to.Path))
			require.NoError(t, err)
			require.Equal(t, to.Content, string(got))
			_, cs = n.plan(t, device(config, to), "rev2")
			require.True(t, cs.Empty(), "converged in one apply; plan: %v", summary(cs))

			inv := n.inventory(t)
			require.Equal(t, "rev2", inv.Revision)
			require.Equal(t, []string{planner.FileID(config.Path), planner.FileID(to.Path)}, sortedKeys(inv.Resources))
			require.True(t, inv.Resources[planner.FileID(to.Path)].Created,
				"nothing of the node's was at %s: tend created it, and prunes it", to.Path)

			cs = n.reconcile(t, device(config), "rev3")
			require.Equal(t, []string{"- " + planner.FileID(to.Path)}, summary(cs))
			require.Equal(t, []string{"etc", "etc/infer", "etc/infer/config.yaml"}, tree(t, n.root))
		})
	}
}
