package diff_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

var sharedPaths = diff.Options{Paths: []string{"common", "devices/{device}"}}

// TestRunSharedPathChangesEveryDevice: a commit that changes only a shared
// source path reaches every device, which is rendered at base and head.
func TestRunSharedPathChangesEveryDevice(t *testing.T) {
	r := testgit.NewRepo(t)
	for i := range 3 {
		name := fmt.Sprintf("cam-%03d", i)
		r.WriteFile("devices/"+name+"/device.yaml", device(name, "threshold: 0.4", false))
	}
	r.WriteFile("common/notes.yaml", "# shared, version 1\n")
	base := r.Commit("fleet")
	r.WriteFile("devices/cam-001/device.yaml", device("cam-001", "threshold: 0.5", false))
	own := r.Commit("one device")
	r.WriteFile("common/notes.yaml", "# shared, version 2\n")
	shared := r.Commit("shared only")
	repo := open(t, r)

	res, err := diff.Run(context.Background(), repo, base, own, sharedPaths)
	require.NoError(t, err)
	require.Equal(t, map[string]diff.Status{"cam-001": diff.Changed}, names(res.Devices))
	require.Equal(t, 1, res.Rendered, "the shared path did not change: only cam-001's folder is read")

	res, err = diff.Run(context.Background(), repo, own, shared, sharedPaths)
	require.NoError(t, err)
	require.Equal(t, 3, res.Rendered, "a change of a shared path reaches every device")
	require.Empty(t, res.Devices, "the change declares nothing new for any of them")
	require.Equal(t, 3, res.Unchanged)

	r.Remove("common")
	gone := r.Commit("drop the shared folder")
	res, err = diff.Run(context.Background(), open(t, r), shared, gone, sharedPaths)
	require.NoError(t, err)
	require.Len(t, res.Devices, 3)
	for _, d := range res.Devices {
		require.Equal(t, diff.Failed, d.Status, d.Name)
		require.ErrorContains(t, d.Err, `source path "common" not found`, d.Name)
	}
}

// TestRunSharedPathDocuments: the documents of a shared path are read
// with the device's own, at base and at head.
func TestRunSharedPathDocuments(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("devices/cam-001/device.yaml", device("cam-001", "threshold: 0.4", false))
	r.WriteFile("common/models.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-001}\nspec:\n  files:\n    - {path: /etc/infer/shared, content: one}\n")
	base := r.Commit("fleet")
	r.WriteFile("common/models.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-001}\nspec:\n  files:\n    - {path: /etc/infer/shared, content: two}\n")
	head := r.Commit("shared only")

	res, err := diff.Run(context.Background(), open(t, r), base, head, sharedPaths)
	require.NoError(t, err)
	require.Len(t, res.Devices, 1)
	d := res.Devices[0]
	require.Equal(t, diff.Changed, d.Status)
	require.Equal(t, "devices/cam-001", d.Path)
	require.Len(t, d.Plan.Actions, 1)
	require.Equal(t, "file/etc/infer/shared", d.Plan.Actions[0].Resource)

	checked, err := diff.Validate(context.Background(), open(t, r), "HEAD", sharedPaths)
	require.NoError(t, err)
	require.Len(t, checked, 1)
	require.NoError(t, checked[0].Err)
	require.Len(t, checked[0].Device.Spec.Files, 2, "validate --all reads the shared path too")
}

func TestRunSharedPathsBranchTargeting(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("README.md", "fleet")
	r.Commit("root")
	r.Branch("devices/cam-001")
	r.WriteFile("device.yaml", device("cam-001", "threshold: 0.4", false))
	r.WriteFile("common/notes.yaml", "# one\n")
	base := r.Commit("cam-001")
	r.WriteFile("common/notes.yaml", "# two\n")
	r.Commit("shared only")
	opts := diff.Options{Paths: []string{".", "common"}, Ref: "devices/{device}"}
	res, err := diff.Run(context.Background(), open(t, r), base, "devices/cam-001", opts)
	require.NoError(t, err)
	require.Equal(t, 1, res.Rendered, "the shared path of the device's branch changed")
}

func TestSourcePathsDiffCannotUse(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("devices/cam-001/device.yaml", device("cam-001", "threshold: 0.4", false))
	r.Commit("fleet")
	cases := []struct {
		name  string
		paths []string
		want  string
	}{
		{"two paths with {device}", []string{"devices/{device}", "secrets/{device}"}, `--path "devices/{device}" and "secrets/{device}" both contain {device}`},
		{"no path with {device}", []string{"common", "devices"}, `none of the source paths (--path common, devices) contains {device}`},
		{"a shared path with a label", []string{"sites/{label:site}", "devices/{device}"}, `--path "sites/{label:site}": a shared source path with {label:KEY}`},
		{"a shared path that climbs out", []string{"../x", "devices/{device}"}, `must not contain ".."`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := diff.Run(context.Background(), open(t, r), "HEAD", "HEAD", diff.Options{Paths: tc.paths})
			require.ErrorContains(t, err, tc.want)
		})
	}
}
