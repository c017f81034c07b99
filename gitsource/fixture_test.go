package gitsource_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/source"
)

// fleet is a fleet repo with this history on main:
//
//	c0 (tag v0, lightweight) ── c1 (tag v1, annotated; main)
//	                              └── c2 (branch feature)
//
// devices/cam-017 holds three manifests at every commit, whose content names
// the commit ("version: 0|1|2"), plus files tend must skip.
type fleet struct {
	repo       *testgit.Repo
	c0, c1, c2 string
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	r := testgit.NewRepo(t)
	f := &fleet{repo: r}
	write := func(version string) {
		r.WriteFile("devices/cam-017/services.yml", "kind: services\nversion: "+version+"\n")
		r.WriteFile("devices/cam-017/models.yaml", "kind: models\nversion: "+version+"\n")
		r.WriteFile("devices/cam-017/sub/extra.yaml", "kind: extra\nversion: "+version+"\n")
	}
	write("0")
	r.WriteFile("devices/cam-017/README.md", "# cam-017\n")
	r.WriteFile("devices/cam-017/notes.txt", "not a manifest\n")
	r.WriteFile("devices/cam-017/models.yaml.bak", "kind: backup\n")
	r.WriteFile("devices/cam-018/device.yaml", "kind: device\n")
	r.WriteFile("docs/README.md", "# docs\n")
	r.WriteFile(".github/workflows/ci.yml", "on: push\n") // CI, not a manifest: dot-folders are skipped
	r.WriteFile("devices/cam-017/.old/x.yaml", "kind: hidden\n")
	r.WriteFile("root.yaml", "kind: root\n")
	// A symlink to a manifest: its blob is the link target, not YAML.
	require.NoError(t, os.Symlink("models.yaml", filepath.Join(r.Dir(), "devices/cam-017/link.yaml")))
	f.c0 = r.Commit("c0")
	r.Tag("v0")

	write("1")
	f.c1 = r.Commit("c1")
	r.AnnotatedTag("v1", "release 1")

	r.Branch("feature")
	write("2")
	f.c2 = r.Commit("c2")
	r.Checkout("main")
	return f
}

// transport is one way of reaching the fleet repo.
type transport struct {
	name string
	url  func(t *testing.T, f *fleet) string
}

var transports = []transport{
	{"local path", func(t *testing.T, f *fleet) string { return f.repo.Dir() }},
	{"file URL", func(t *testing.T, f *fleet) string { return "file://" + f.repo.Dir() }},
	{"http", func(t *testing.T, f *fleet) string {
		return f.repo.URL(testgit.ServeHTTP(t, filepath.Dir(f.repo.Dir())))
	}},
}

// fetch runs Fetch with a clone in dir.
func fetch(t testing.TB, dir string, src gitsource.Source) (*source.Snapshot, error) {
	t.Helper()
	return gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir})
}

// paths lists the snapshot's file paths.
func paths(s *source.Snapshot) []string {
	var out []string
	for _, f := range s.Files {
		out = append(out, f.Path)
	}
	return out
}

// content returns the data of the file at path in the snapshot.
func content(t *testing.T, s *source.Snapshot, path string) string {
	t.Helper()
	for _, f := range s.Files {
		if f.Path == path {
			return string(f.Data)
		}
	}
	t.Fatalf("%s not in snapshot %v", path, paths(s))
	return ""
}
