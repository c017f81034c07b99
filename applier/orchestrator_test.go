package applier_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/confine"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

var (
	config = manifest.File{Path: "/etc/infer/config.yaml", Content: "threshold: 0.4\n"}
	labels = manifest.File{Path: "/etc/infer/labels.txt", Content: "cat\ndog\n", Mode: "0600"}
)

func TestRoundTrip(t *testing.T) {
	n := newNode(t)
	dev := device(config, labels)

	t.Run("first apply creates", func(t *testing.T) {
		cs := n.reconcile(t, dev, "rev1")
		require.Equal(t, []string{"+ file/etc/infer/config.yaml", "+ file/etc/infer/labels.txt"}, summary(cs))
		got, err := os.ReadFile(n.node(config.Path))
		require.NoError(t, err)
		require.Equal(t, config.Content, string(got))
		require.Equal(t, os.FileMode(0o600), perm(t, n.node(labels.Path)))
		inv := n.inventory(t)
		require.Equal(t, "rev1", inv.Revision)
		require.Equal(t, "cam-017", inv.Device)
		require.Len(t, inv.Resources, 2)
	})

	t.Run("second plan is empty", func(t *testing.T) {
		_, cs := n.plan(t, dev, "rev1")
		require.True(t, cs.Empty(), "plan: %v", summary(cs))
		require.Equal(t, 2, cs.Unchanged)
	})

	t.Run("hand edit is drift and is reverted", func(t *testing.T) {
		require.NoError(t, os.WriteFile(n.node(config.Path), []byte("threshold: 0.9\n"), 0o644))
		cs := n.reconcile(t, dev, "rev1")
		require.Len(t, cs.Actions, 1)
		a := cs.Actions[0]
		require.Equal(t, planner.Update, a.Type)
		require.Equal(t, "file/etc/infer/config.yaml", a.Resource)
		require.True(t, a.IsDrift())
		require.True(t, strings.HasPrefix(a.Reason, "drift:"), a.Reason)
		got, err := os.ReadFile(n.node(config.Path))
		require.NoError(t, err)
		require.Equal(t, config.Content, string(got))
	})

	t.Run("hand chmod is drift and is reverted", func(t *testing.T) {
		require.NoError(t, os.Chmod(n.node(labels.Path), 0o666))
		cs := n.reconcile(t, dev, "rev1")
		require.Equal(t, []string{"~ file/etc/infer/labels.txt"}, summary(cs))
		require.Equal(t, "drift: mode changed on node", cs.Actions[0].Reason)
		require.Equal(t, os.FileMode(0o600), perm(t, n.node(labels.Path)))
	})

	t.Run("a file tend never created is never deleted", func(t *testing.T) {
		foreign := n.node("/etc/infer/foreign.yaml")
		require.NoError(t, os.WriteFile(foreign, []byte("mine"), 0o644))
		_, cs := n.plan(t, device(config), "rev2")
		require.Equal(t, []string{"- file/etc/infer/labels.txt"}, summary(cs))
		require.FileExists(t, foreign)
	})

	t.Run("undeclared file is deleted, only it", func(t *testing.T) {
		cs := n.reconcile(t, device(config), "rev2")
		require.Equal(t, []string{"- file/etc/infer/labels.txt"}, summary(cs))
		require.NoFileExists(t, n.node(labels.Path))
		require.FileExists(t, n.node(config.Path))
		require.FileExists(t, n.node("/etc/infer/foreign.yaml"))
		inv := n.inventory(t)
		require.Equal(t, "rev2", inv.Revision)
		require.Equal(t, []string{"file/etc/infer/config.yaml"}, sortedKeys(inv.Resources))

		_, cs = n.plan(t, device(config), "rev2")
		require.True(t, cs.Empty(), "plan: %v", summary(cs))
	})

	t.Run("change in Git is an update, not drift", func(t *testing.T) {
		changed := config
		changed.Content = "threshold: 0.5\n"
		cs := n.reconcile(t, device(changed), "rev3")
		require.Len(t, cs.Actions, 1)
		require.False(t, cs.Actions[0].IsDrift())
		require.Equal(t, "update: content changed in Git", cs.Actions[0].Reason)
	})

	t.Run("managed file removed by hand is dropped from the inventory", func(t *testing.T) {
		n := newNode(t)
		n.reconcile(t, device(config, labels), "rev1")
		require.NoError(t, os.Remove(n.node(labels.Path)))
		cs := n.reconcile(t, device(config), "rev2")
		require.Empty(t, cs.Actions)
		require.Equal(t, []string{"file/etc/infer/config.yaml"}, sortedKeys(n.inventory(t).Resources))
	})

	require.Empty(t, tempFiles(t, n.root))
	require.Empty(t, tempFiles(t, n.stateDir))
}

func TestApplyLogs(t *testing.T) {
	n := newNode(t)
	n.reconcile(t, device(config), "rev1")
	var entry map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(n.Logs.Bytes()), &entry))
	require.Equal(t, "applied", entry["msg"])
	require.Equal(t, "file/etc/infer/config.yaml", entry["resource"])
	require.Equal(t, "create", entry["action"])
	require.Equal(t, "declared", entry["reason"])
}

func TestPartialFailure(t *testing.T) {
	a := manifest.File{Path: "/etc/infer/a", Content: "a"}
	b := manifest.File{Path: "/etc/infer/b", Content: "b"}
	c := manifest.File{Path: "/etc/infer/c", Content: "c"}
	n := newNode(t)
	n.reconcile(t, device(config), "rev1")
	tick, cs := n.plan(t, device(a, b, c), "rev2")
	require.Equal(t, []string{"+ file/etc/infer/a", "+ file/etc/infer/b", "+ file/etc/infer/c",
		"- file/etc/infer/config.yaml"}, summary(cs))
	// Once planned, b's path gets a directory, which tend never replaces.
	require.NoError(t, os.MkdirAll(n.node("/etc/infer/b/keep"), 0o755))
	res, err := tick.Apply(context.Background())
	require.ErrorIs(t, err, confine.ErrNotRegular)
	require.ErrorContains(t, err, "apply file/etc/infer/b: ")
	require.Equal(t, []planner.Action{cs.Actions[0]}, res.Applied)
	require.NotNil(t, res.Failed)
	require.Equal(t, "file/etc/infer/b", res.Failed.Resource)

	require.FileExists(t, n.node(a.Path))
	require.NoFileExists(t, n.node(c.Path))
	require.FileExists(t, n.node(config.Path), "actions after the failure are not run")
	inv := n.inventory(t)
	require.Equal(t, "rev1", inv.Revision, "the revision does not advance")
	require.Equal(t, []string{"file/etc/infer/a", "file/etc/infer/config.yaml"}, sortedKeys(inv.Resources))
	require.Equal(t, fields(t, a), inv.Resources["file/etc/infer/a"].Fields)

	// Once the node is fixed the next apply finishes the job.
	require.NoError(t, os.RemoveAll(n.node("/etc/infer/b")))
	cs = n.reconcile(t, device(a, b, c), "rev2")
	require.Equal(t, []string{"+ file/etc/infer/b", "+ file/etc/infer/c", "- file/etc/infer/config.yaml"}, summary(cs))
	inv = n.inventory(t)
	require.Equal(t, "rev2", inv.Revision)
	require.Equal(t, []string{"file/etc/infer/a", "file/etc/infer/b", "file/etc/infer/c"}, sortedKeys(inv.Resources))
}

// What the plan knows will fail is left out, with what depends on it; the
// rest is applied, and the revision does not move.
func TestPlannedFailureIsLeftOut(t *testing.T) {
	a := manifest.File{Path: "/etc/infer/a", Content: "a"}
	b := manifest.File{Path: "/etc/infer/b", Content: "b"}
	n := newNode(t)
	n.reconcile(t, device(config), "rev1")
	require.NoError(t, os.MkdirAll(n.node("/etc/infer/b/keep"), 0o755))
	tick, cs := n.plan(t, device(a, b), "rev2")
	require.Equal(t, []string{"+ file/etc/infer/a", "~ file/etc/infer/b", "- file/etc/infer/config.yaml"}, summary(cs))
	require.Contains(t, cs.Actions[1].Error, "is a directory; tend replaces files and symlinks, never directories")
	res, err := tick.Apply(context.Background())
	var skipped *planner.SkippedError
	require.ErrorAs(t, err, &skipped)
	require.Equal(t, []planner.Action{cs.Actions[1]}, res.Skipped)
	require.Len(t, res.Applied, 2)
	require.FileExists(t, n.node(a.Path))
	require.NoFileExists(t, n.node(config.Path))
	require.DirExists(t, n.node("/etc/infer/b/keep"))
	inv := n.inventory(t)
	require.Equal(t, "rev1", inv.Revision, "the revision does not advance")
	require.Equal(t, []string{"file/etc/infer/a"}, sortedKeys(inv.Resources))
}

func TestApplyCanceled(t *testing.T) {
	n := newNode(t)
	tick, _ := n.plan(t, device(config), "rev1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := tick.Apply(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, res.Applied)
	require.NoFileExists(t, n.node(config.Path))
	require.Empty(t, n.inventory(t).Revision)
}

// After Apply, the applier's copy of the inventory is what stateDir
// holds: the one Apply saved, or the one it left unchanged. A save that
// fails drops it, so that it is read again.
func TestInventoryAfterApply(t *testing.T) {
	n := newNode(t)
	n.Now = func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC) } // saved in seconds
	for _, step := range []struct {
		name string
		rev  string
		dev  *manifest.Device
	}{
		{"saved", "rev1", device(config, labels)},
		{"unchanged", "rev1", device(config, labels)},
		{"saved again", "rev2", device(config)},
	} {
		t.Run(step.name, func(t *testing.T) {
			tick, _ := n.plan(t, step.dev, step.rev)
			_, err := tick.Apply(context.Background())
			require.NoError(t, err)
			held, err := tick.Applier.Inventory()
			require.NoError(t, err)
			require.Equal(t, n.inventory(t), held)
		})
	}

	t.Run("not read again", func(t *testing.T) {
		tick, _ := n.plan(t, device(config), "rev2")
		_, err := tick.Apply(context.Background())
		require.NoError(t, err)
		want := n.inventory(t)
		inv := filepath.Join(n.stateDir, statedir.InventoryFile)
		require.NoError(t, os.WriteFile(inv, []byte("{"), 0o600))
		held, err := tick.Applier.Inventory()
		require.NoError(t, err)
		require.Equal(t, want, held)
		require.NoError(t, held.Save(n.stateDir))
	})

	t.Run("dropped when the save fails", func(t *testing.T) {
		tick, _ := n.plan(t, device(config, labels), "rev3")
		inv := filepath.Join(n.stateDir, statedir.InventoryFile)
		require.NoError(t, os.Remove(inv))
		require.NoError(t, os.Mkdir(inv, 0o755)) // the rename over it fails
		_, err := tick.Apply(context.Background())
		require.Error(t, err)
		_, err = tick.Applier.Inventory()
		require.ErrorContains(t, err, "read inventory", "read again, not the copy the failed save held")
	})
}
