package gitsource_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/source"
)

// pathsFleet is a repo with shared profiles and device folders.
func pathsFleet(t *testing.T) *testgit.Repo {
	t.Helper()
	r := testgit.NewRepo(t)
	r.WriteFile("profiles/base.yaml", "kind: base\n")
	r.WriteFile("profiles/gpu/cuda.yml", "kind: cuda\n")
	r.WriteFile("devices/cam-017/device.yaml", "kind: device\n")
	r.WriteFile("devices/cam-018/device.yaml", "kind: other\n")
	r.WriteFile("README.md", "not a manifest\n")
	r.Commit("fleet")
	return r
}

type fileSeen struct {
	Path      string
	PerDevice bool
}

func seen(s *source.Snapshot) []fileSeen {
	var out []fileSeen
	for _, f := range s.Files {
		out = append(out, fileSeen{f.Path, f.PerDevice})
	}
	return out
}

func TestFetchSeveralPaths(t *testing.T) {
	r := pathsFleet(t)
	profiles := source.Path{Dir: "profiles"}
	cam017 := source.Path{Dir: "devices/cam-017", PerDevice: true}
	cases := []struct {
		name  string
		paths []source.Path
		want  []fileSeen
	}{
		{"shared and per device, sorted", []source.Path{cam017, profiles}, []fileSeen{
			{"devices/cam-017/device.yaml", true}, {"profiles/base.yaml", false}, {"profiles/gpu/cuda.yml", false},
		}},
		{"overlapping paths read each file once", []source.Path{profiles, {Dir: "profiles/gpu"}, {Dir: "."}}, []fileSeen{
			{"devices/cam-017/device.yaml", false}, {"devices/cam-018/device.yaml", false},
			{"profiles/base.yaml", false}, {"profiles/gpu/cuda.yml", false},
		}},
		{"a file under a per-device path is per device, even when a shared path reaches it", []source.Path{{Dir: "devices"}, cam017}, []fileSeen{
			{"devices/cam-017/device.yaml", true}, {"devices/cam-018/device.yaml", false},
		}},
		{"a device without a folder of its own takes the shared paths", []source.Path{profiles, {Dir: "devices/cam-099", PerDevice: true}}, []fileSeen{
			{"profiles/base.yaml", false}, {"profiles/gpu/cuda.yml", false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := fetch(t, t.TempDir(), gitsource.Source{URL: r.Dir(), Ref: "main", Paths: tc.paths})
			require.NoError(t, err)
			require.Equal(t, tc.want, seen(snap))
		})
	}
}

func TestFetchSeveralPathsMissing(t *testing.T) {
	r := pathsFleet(t)
	cases := []struct {
		name   string
		paths  []source.Path
		want   string
		shared bool
	}{
		{"a missing shared path is an error naming it", []source.Path{{Dir: "profile"}, {Dir: "devices/cam-017", PerDevice: true}},
			`source path "profile" not found in ` + r.Dir(), true},
		{"a shared path that is a file", []source.Path{{Dir: "README.md"}, {Dir: "devices/cam-017", PerDevice: true}},
			`source path "README.md" not found`, true},
		{"every path missing is no manifests", []source.Path{{Dir: "profile"}, {Dir: "devices/cam-099", PerDevice: true}},
			`no *.yaml or *.yml files under any of profile, devices/cam-099 in ` + r.Dir(), false},
		{"one path, missing: as before", []source.Path{{Dir: "devices/cam-099", PerDevice: true}},
			`path "devices/cam-099" not found in ` + r.Dir(), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := fetch(t, t.TempDir(), gitsource.Source{URL: r.Dir(), Ref: "main", Paths: tc.paths})
			require.ErrorContains(t, err, tc.want)
			require.ErrorIs(t, err, source.ErrPathNotFound)
			require.Equal(t, tc.shared, errors.Is(err, source.ErrSharedPathNotFound))
		})
	}
}

// TestFetchSeveralPathsHoldsOnMissingSharedPath: a commit that deletes a
// shared folder is refused like one without manifests, and the node holds
// its last applied commit.
func TestFetchSeveralPathsHoldsOnMissingSharedPath(t *testing.T) {
	r := pathsFleet(t)
	applied := r.Head()
	r.Remove("profiles")
	r.Commit("drop profiles")
	src := gitsource.Source{URL: r.Dir(), Ref: "main", LastApplied: applied,
		Paths: []source.Path{{Dir: "profiles"}, {Dir: "devices/cam-017", PerDevice: true}}}
	dir := t.TempDir()
	first := src
	first.LastApplied = ""
	first.Ref = applied
	_, err := fetch(t, dir, first)
	require.NoError(t, err)
	snap, err := fetch(t, dir, src)
	require.NoError(t, err)
	require.Equal(t, applied, snap.Revision.Commit)
	require.ErrorIs(t, snap.Stale, source.ErrSharedPathNotFound)
	require.Len(t, snap.Files, 3)
}
