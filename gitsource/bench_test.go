package gitsource_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// benchRepo is a small fleet repo already fetched into a clone.
func benchRepo(b *testing.B) (gitsource.Source, gitsource.Options) {
	b.Helper()
	r := testgit.NewRepo(b)
	for i := range 20 {
		r.WriteFile("devices/cam-017/m"+string(rune('a'+i))+".yaml", "kind: models\n")
		r.Commit("c")
	}
	src := gitsource.Source{URL: r.Dir(), Ref: "main", Path: "devices/cam-017"}
	opts := gitsource.Options{Dir: b.TempDir()}
	if _, err := gitsource.Fetch(context.Background(), src, opts); err != nil {
		b.Fatal(err)
	}
	return src, opts
}

// BenchmarkFetchNoop is a tick with nothing new upstream: list the remote's
// refs, find the commit in the clone, read the device's files.
func BenchmarkFetchNoop(b *testing.B) {
	src, opts := benchRepo(b)
	ctx := context.Background()
	for b.Loop() {
		snap, err := gitsource.Fetch(ctx, src, opts)
		if err != nil {
			b.Fatal(err)
		}
		if snap.Fetched {
			b.Fatal("fetched on a no-op")
		}
	}
}

// BenchmarkGitLsRemote is the reference for BenchmarkFetchNoop: the git
// command line only listing the same repo's refs.
func BenchmarkGitLsRemote(b *testing.B) {
	src, _ := benchRepo(b)
	env := append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1")
	for b.Loop() {
		cmd := exec.Command("git", "ls-remote", src.URL, "refs/heads/main")
		cmd.Env = env
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
