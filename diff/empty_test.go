package diff_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// Devices that render to nothing at head are warned of, at most 20 by
// name; with profiles read, the warning points at the labels instead of
// the source paths.
func TestRunWarnsOfDevicesThatRenderToNothing(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("profiles/p.yaml", profileDoc("p", "  selector: {matchLabels: {hw: orin}}\n  files: [{path: /etc/p, content: p}]\n"))
	r.WriteFile("devices/full/device.yaml", labelled("full", "hw: orin", "  files: [{path: /etc/x, content: x}]\n"))
	r.Commit("base")
	for i := range 25 {
		name := fmt.Sprintf("cam-%02d", i)
		r.WriteFile("devices/"+name+"/device.yaml", labelled(name, "hw: x86", "  files: []\n"))
	}
	r.Commit("25 devices with labels only")

	res, err := diff.Run(context.Background(), open(t, r), "HEAD~1", "HEAD", diff.Options{Path: "devices/{device}"})
	require.NoError(t, err)
	require.Len(t, res.Empty, 25)
	require.Equal(t, []string{"25 devices render to nothing at HEAD (no models, files or services): " +
		"cam-00, cam-01, cam-02, cam-03, cam-04, cam-05, cam-06, cam-07, cam-08, cam-09, cam-10, cam-11, cam-12, cam-13, cam-14, cam-15, cam-16, cam-17, cam-18, cam-19, … and 5 more; " +
		"only devices/{device} was read: if profiles declare their resources, give every source path the agents read (source.paths), e.g. --path profiles --path 'devices/{device}'."},
		res.Warnings())

	res, err = diff.Run(context.Background(), open(t, r), "HEAD~1", "HEAD", profilePaths)
	require.NoError(t, err)
	require.Len(t, res.Empty, 25, "no profile selects hw: x86")
	require.Contains(t, res.Warnings()[0], "; no profile declares anything for them: check their labels against the profiles' selectors.")

	checked, err := diff.Validate(context.Background(), open(t, r), "HEAD", profilePaths)
	require.NoError(t, err)
	require.Len(t, checked, 26)
	for _, c := range checked {
		if c.Name == "full" {
			require.Empty(t, c.Warning)
			continue
		}
		require.Equal(t, "renders to nothing (no models, files or services); no profile declares anything for it: check its labels against the profiles' selectors", c.Warning)
	}
}
