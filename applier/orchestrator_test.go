package applier

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

type testNode struct {
	a        *Applier
	root     string
	stateDir string
	logs     *bytes.Buffer
}

func newNode(t testing.TB) *testNode {
	t.Helper()
	n := &testNode{root: t.TempDir(), stateDir: filepath.Join(t.TempDir(), "state"), logs: &bytes.Buffer{}}
	a, err := New(Config{
		Root: n.root, StateDir: n.stateDir, AllowPaths: []string{testAllow},
		Logger: slog.New(slog.NewJSONHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	a.now = func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) }
	n.a = a
	return n
}

func device(files ...manifest.File) *manifest.Device {
	return &manifest.Device{Metadata: manifest.Metadata{Name: "cam-017"}, Spec: manifest.DeviceSpec{Files: files}}
}

// plan renders dev at rev, observes the node and plans.
func (n *testNode) plan(t testing.TB, dev *manifest.Device, rev string) (planner.Desired, *planner.Changeset) {
	t.Helper()
	ctx := context.Background()
	d, err := n.a.Desired(context.Background(), dev, rev)
	require.NoError(t, err)
	obs, err := n.a.Observe(ctx, d)
	require.NoError(t, err)
	cs, err := planner.Plan(d, obs, planner.Options{})
	require.NoError(t, err)
	return d, cs
}

// reconcile plans and applies, and returns the plan.
func (n *testNode) reconcile(t testing.TB, dev *manifest.Device, rev string) *planner.Changeset {
	t.Helper()
	d, cs := n.plan(t, dev, rev)
	res, err := n.a.Apply(context.Background(), d, cs)
	require.NoError(t, err)
	require.Nil(t, res.Failed)
	require.Equal(t, cs.Actions, res.Applied)
	return cs
}

func (n *testNode) node(p string) string { return filepath.Join(n.root, p) }

func (n *testNode) inventory(t testing.TB) *Inventory {
	t.Helper()
	inv, err := LoadInventory(n.stateDir)
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
		require.True(t, a.Drift)
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
		require.False(t, cs.Actions[0].Drift)
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
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(n.logs.Bytes()), &entry))
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
	// b's path holds a directory, which tend never replaces.
	require.NoError(t, os.MkdirAll(n.node("/etc/infer/b/keep"), 0o755))

	d, cs := n.plan(t, device(a, b, c), "rev2")
	require.Equal(t, []string{"+ file/etc/infer/a", "~ file/etc/infer/b", "+ file/etc/infer/c",
		"- file/etc/infer/config.yaml"}, summary(cs))
	res, err := n.a.Apply(context.Background(), d, cs)
	require.ErrorIs(t, err, ErrNotRegular)
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
	require.Equal(t, FileResource(a).Fields, inv.Resources["file/etc/infer/a"].Fields)

	// Once the node is fixed the next apply finishes the job.
	require.NoError(t, os.RemoveAll(n.node("/etc/infer/b")))
	cs = n.reconcile(t, device(a, b, c), "rev2")
	require.Equal(t, []string{"+ file/etc/infer/b", "+ file/etc/infer/c", "- file/etc/infer/config.yaml"}, summary(cs))
	inv = n.inventory(t)
	require.Equal(t, "rev2", inv.Revision)
	require.Equal(t, []string{"file/etc/infer/a", "file/etc/infer/b", "file/etc/infer/c"}, sortedKeys(inv.Resources))
}

func TestApplyCanceled(t *testing.T) {
	n := newNode(t)
	d, cs := n.plan(t, device(config), "rev1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := n.a.Apply(ctx, d, cs)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, res.Applied)
	require.NoFileExists(t, n.node(config.Path))
	require.Empty(t, n.inventory(t).Revision)
}

func TestDesired(t *testing.T) {
	tests := []struct {
		name    string
		files   []manifest.File
		wantErr string
	}{
		{"ok", []manifest.File{config, labels}, ""},
		{"relative path", []manifest.File{{Path: "etc/infer/x"}}, `file "etc/infer/x": invalid path: "etc/infer/x" is not absolute`},
		{"not allowed", []manifest.File{{Path: "/etc/passwd", Origin: manifest.Origin{File: "devices/cam-017/files.yaml", Field: "spec.files[0]"}}},
			"file/etc/passwd (devices/cam-017/files.yaml spec.files[0]): path not allowed: /etc/passwd is not under any allowed path (/etc/infer); add an allowPaths entry"},
		{"bad mode", []manifest.File{{Path: "/etc/infer/x", Mode: "rwx"}}, `file/etc/infer/x: invalid file mode "rwx"`},
		{"declared twice", []manifest.File{config, config}, "file/etc/infer/config.yaml: declared twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t)
			d, err := n.a.Desired(context.Background(), device(tt.files...), "rev1")
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "cam-017", d.Device)
			require.Equal(t, "rev1", d.Revision)
			require.Equal(t, []planner.Resource{FileResource(config), FileResource(labels)}, d.Resources)
		})
	}
}
