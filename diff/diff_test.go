package diff_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/manifest"
)

// device is a Device document with one file whose content is content, and
// a service when svc is set.
func device(name, content string, svc bool) string {
	s := fmt.Sprintf(`apiVersion: tend.dev/v1alpha1
kind: Device
metadata: {name: %s}
spec:
  files:
    - path: /etc/infer/config.yaml
      content: %q
`, name, content)
	if svc {
		s += `  services:
    - name: infer
      command: ["/opt/infer/server", "--config", "${file:/etc/infer/config.yaml}"]
`
	}
	return s
}

func open(t *testing.T, r *testgit.Repo) *git.Repository {
	t.Helper()
	repo, err := git.PlainOpen(r.Dir())
	require.NoError(t, err)
	return repo
}

func names(ds []diff.Device) map[string]diff.Status {
	out := map[string]diff.Status{}
	for _, d := range ds {
		out[d.Name] = d.Status
	}
	return out
}

func TestRunPathTargeting(t *testing.T) {
	r := testgit.NewRepo(t)
	for i := range 20 {
		name := fmt.Sprintf("cam-%03d", i)
		r.WriteFile("devices/"+name+"/device.yaml", device(name, "threshold: 0.4", i == 1))
	}
	r.WriteFile("devices/README.md", "not a device")
	r.WriteFile("devices/.github/x.yaml", "hidden: folders are not devices")
	base := r.Commit("fleet")
	r.WriteFile("devices/cam-001/device.yaml", device("cam-001", "threshold: 0.5", true))
	r.Remove("devices/cam-002")
	r.WriteFile("devices/cam-100/device.yaml", device("cam-100", "threshold: 0.4", false))
	r.WriteFile("devices/cam-003/README.md", "docs change, manifests do not")
	r.Commit("change")
	r.WriteFile("devices/cam-004/device.yaml", device("cam-004", "threshold: 0.9", false))
	r.Commit("another")

	res, err := diff.Run(context.Background(), open(t, r), base, "HEAD~1", diff.Options{Path: "devices/{device}"})
	require.NoError(t, err)
	require.Equal(t, map[string]diff.Status{"cam-001": diff.Changed, "cam-002": diff.Removed, "cam-100": diff.Added}, names(res.Devices))
	require.Equal(t, 4, res.Rendered, "only the folders whose tree changed are read: cam-001, cam-002, cam-003, cam-100")
	require.Equal(t, 18, res.Unchanged, "cam-003's manifests are the same; the 17 untouched devices are counted")
	require.True(t, res.Changes())

	changed := res.Devices[0]
	var got []string
	for _, a := range changed.Plan.Actions {
		got = append(got, a.String())
	}
	require.Equal(t, []string{
		"~ file/etc/infer/config.yaml (update: content changed in Git)",
		"~ service/infer (restart: file/etc/infer/config.yaml changed)",
	}, got)
	// A removed device's agent fails and keeps its state: nothing deleted.
	require.Equal(t, diff.Removed, res.Devices[1].Status)
	require.Zero(t, res.Devices[1].Plan.Summary().Delete)
	require.Contains(t, res.Devices[1].Note, "nothing on it is deleted")
	require.Equal(t, 1, res.Devices[2].Plan.Summary().Add)

	t.Run("same revision changes nothing and reads nothing", func(t *testing.T) {
		res, err := diff.Run(context.Background(), open(t, r), "HEAD", "main", diff.Options{Path: "devices/{device}"})
		require.NoError(t, err)
		require.Empty(t, res.Devices)
		require.Zero(t, res.Rendered)
		require.Equal(t, 20, res.Unchanged)
		require.False(t, res.Changes())
	})
}

func TestRunInvalidAtHead(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("devices/a/device.yaml", device("a", "1", false))
	r.WriteFile("devices/b/device.yaml", device("b", "1", false))
	r.Commit("fleet")
	r.WriteFile("devices/a/device.yaml", strings.Replace(device("a", "2", false), "/etc/infer/config.yaml", "etc/relative", 1))
	r.WriteFile("devices/b/device.yaml", device("b", "2", false))
	r.Commit("break a, change b")

	res, err := diff.Run(context.Background(), open(t, r), "HEAD~1", "HEAD", diff.Options{Path: "devices/{device}"})
	require.NoError(t, err)
	require.Equal(t, map[string]diff.Status{"a": diff.Failed, "b": diff.Changed}, names(res.Devices), "the other devices are still planned")
	require.Len(t, res.Errors(), 1)
	msg := res.Errors()[0].Err.Error()
	require.Contains(t, msg, "devices/a/device.yaml:")
	require.Contains(t, msg, "spec.files[0].path")
	require.True(t, errors.Is(res.Errors()[0].Err, manifest.ErrInvalid))

	t.Run("invalid at base is planned against an empty device, with a note", func(t *testing.T) {
		res, err := diff.Run(context.Background(), open(t, r), "HEAD", "HEAD~1", diff.Options{Path: "devices/{device}"})
		require.NoError(t, err)
		require.Equal(t, diff.Changed, res.Devices[0].Status)
		require.Contains(t, res.Devices[0].Note, "does not render at base")
		require.Equal(t, 1, res.Devices[0].Plan.Summary().Add)
	})
}

func TestRunBranchTargeting(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("README.md", "fleet")
	r.Commit("init")
	for _, name := range []string{"cam-1", "cam-2", "cam-3"} {
		r.Git("checkout", "--quiet", "--orphan", "devices/"+name)
		r.Git("rm", "-rf", "--quiet", ".")
		r.WriteFile("device.yaml", device(name, "v1", false))
		r.Commit(name)
	}
	// origin/devices/* is what the server has; the local branches are
	// what a push would change.
	r.Git("update-ref", "refs/remotes/origin/devices/cam-1", "devices/cam-1")
	r.Git("update-ref", "refs/remotes/origin/devices/cam-2", "devices/cam-2")
	r.Checkout("devices/cam-1")
	r.WriteFile("device.yaml", device("cam-1", "v2", false))
	r.Commit("cam-1 v2")
	r.Checkout("main")
	repo := open(t, r)

	opts := diff.Options{Ref: "devices/{device}"}
	res, err := diff.Run(context.Background(), repo, "origin/devices/{device}", "devices/{device}", opts)
	require.NoError(t, err)
	require.Equal(t, map[string]diff.Status{"cam-1": diff.Changed, "cam-3": diff.Added}, names(res.Devices))
	require.Equal(t, 1, res.Unchanged)
	require.Equal(t, "devices/cam-1", res.Devices[0].Plan.Revision[:len("devices/cam-1")])

	t.Run("a device branch as base is that device alone", func(t *testing.T) {
		res, err := diff.Run(context.Background(), repo, "origin/devices/cam-1", "devices/cam-1", opts)
		require.NoError(t, err)
		require.Equal(t, map[string]diff.Status{"cam-1": diff.Changed}, names(res.Devices))
		require.Zero(t, res.Unchanged)
	})
	t.Run("revisions that name no device are refused", func(t *testing.T) {
		_, err := diff.Run(context.Background(), repo, "main", "HEAD", opts)
		require.ErrorIs(t, err, diff.ErrNoDevicePlaceholder)
		require.Contains(t, err.Error(), "--base or --head must contain {device}")
	})
}

func TestRunLabelsAndMoves(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("sites/a/cam-1/device.yaml", device("cam-1", "v1", false))
	r.WriteFile("sites/b/cam-2/device.yaml", device("cam-2", "v1", false))
	r.Commit("fleet")
	r.Git("mv", "sites/a/cam-1", "sites/b/cam-1")
	r.Commit("move cam-1 to site b")
	res, err := diff.Run(context.Background(), open(t, r), "HEAD~1", "HEAD", diff.Options{Path: "sites/{label:site}/{device}"})
	require.NoError(t, err)
	require.Empty(t, res.Devices, "a device that moves folder with the same files does not change")
	require.Equal(t, 2, res.Unchanged)
	require.Zero(t, res.Rendered)
}

func TestRunBadInput(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("devices/a/device.yaml", device("a", "1", false))
	r.Commit("fleet")
	repo := open(t, r)
	for _, tt := range []struct {
		name, base, path string
		is               error
		want             string
	}{
		{"unknown revision", "no-such-branch", "devices/{device}", diff.ErrUnknownRevision, `"no-such-branch"`},
		{"path without {device}", "HEAD", "devices/a", diff.ErrNoDevicePlaceholder, "add {device}"},
		{"unknown placeholder", "HEAD", "devices/{name}", diff.ErrBadPattern, "unknown placeholder {name}"},
		{"path out of the repo", "HEAD", "../{device}", diff.ErrBadPattern, `".."`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := diff.Run(context.Background(), repo, tt.base, "HEAD", diff.Options{Path: tt.path})
			require.ErrorIs(t, err, tt.is)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestValidate(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("devices/a/device.yaml", device("a", "1", false))
	r.WriteFile("devices/b/device.yaml", strings.Replace(device("b", "1", false), "/etc/infer/config.yaml", "relative", 1))
	r.WriteFile("devices/c/device.yaml", strings.Replace(device("c", "1", false), "metadata: {name: c}", "metadata: {name: x}", 1))
	r.Commit("fleet")
	checked, err := diff.Validate(context.Background(), open(t, r), "HEAD", diff.Options{Path: "devices/{device}"})
	require.NoError(t, err)
	require.Len(t, checked, 3)
	require.NoError(t, checked[0].Err)
	require.ErrorContains(t, checked[1].Err, "devices/b/device.yaml:6: spec.files[0].path")
	require.ErrorContains(t, checked[2].Err, "devices/c/device.yaml:3: metadata.name")
}

func TestMarkdownTruncates(t *testing.T) {
	r := testgit.NewRepo(t)
	for i := range 60 {
		r.WriteFile(fmt.Sprintf("devices/d%02d/device.yaml", i), device(fmt.Sprintf("d%02d", i), "1", true))
	}
	r.Commit("fleet")
	for i := range 60 {
		r.WriteFile(fmt.Sprintf("devices/d%02d/device.yaml", i), device(fmt.Sprintf("d%02d", i), "2", true))
	}
	r.Commit("change all")
	res, err := diff.Run(context.Background(), open(t, r), "HEAD~1", "HEAD", diff.Options{Path: "devices/{device}"})
	require.NoError(t, err)
	require.Len(t, res.Devices, 60)

	var full bytes.Buffer
	require.NoError(t, diff.WriteMarkdown(&full, res, diff.MarkdownOptions{}))
	require.NotContains(t, full.String(), "left out")
	require.Equal(t, 60, strings.Count(full.String(), "<details>"))

	for _, limit := range []int{4000, 12000} {
		var b bytes.Buffer
		require.NoError(t, diff.WriteMarkdown(&b, res, diff.MarkdownOptions{Limit: limit}))
		require.LessOrEqual(t, b.Len(), limit)
		require.Contains(t, b.String(), "left out")
		require.True(t, strings.HasPrefix(b.String(), diff.CommentMarker))
	}
	var b bytes.Buffer
	require.NoError(t, diff.WriteMarkdown(&b, res, diff.MarkdownOptions{Limit: 1500}))
	rows := strings.Count(b.String(), "| changed |")
	require.Contains(t, b.String(), fmt.Sprintf("%d of 60 devices that change are left out of this comment", 60-rows))
	b.Reset()
	require.NoError(t, diff.WriteMarkdown(&b, res, diff.MarkdownOptions{Limit: 6000}))
	require.Equal(t, 60, strings.Count(b.String(), "| changed |"))
	require.Contains(t, b.String(), fmt.Sprintf("The plans of %d devices in the table are left out", 60-strings.Count(b.String(), "<details>")))
}

func TestRunEmptyDeclaration(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("devices/a/device.yaml", device("a", "1", false))
	r.Commit("fleet")
	r.WriteFile("devices/a/device.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: a}\nspec: {}\n")
	r.Commit("empty a")
	repo := open(t, r)

	res, err := diff.Run(context.Background(), repo, "HEAD~1", "HEAD", diff.Options{Path: "devices/{device}"})
	require.NoError(t, err)
	require.Equal(t, diff.Failed, res.Devices[0].Status, "the agent refuses a commit that empties a device")
	require.ErrorContains(t, res.Devices[0].Err, "allowEmpty: true")

	res, err = diff.Run(context.Background(), repo, "HEAD~1", "HEAD", diff.Options{Path: "devices/{device}", AllowEmpty: true})
	require.NoError(t, err)
	require.Equal(t, diff.Changed, res.Devices[0].Status)
	require.Equal(t, 1, res.Devices[0].Plan.Summary().Delete)
}
