package gitsource_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testmeter"
)

// countingServer serves parent over smart HTTP with the real git
// http-backend and counts the bytes it sends.
func countingServer(b *testing.B, parent string) (*httptest.Server, *atomic.Int64) {
	var m testmeter.Meter
	srv := httptest.NewServer(m.Handler(testgit.HTTPHandler(b, parent)))
	b.Cleanup(srv.Close)
	return srv, &m.Bytes
}

// fleetRepo is a fleet of n devices with a few commits of history.
func fleetRepo(b *testing.B, n int) *testgit.Repo {
	r := testgit.NewRepo(b)
	for gen := range 3 {
		for i := range n {
			r.WriteFile(fmt.Sprintf("devices/dev-%04d/device.yaml", i), fmt.Sprintf(
				"apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: dev-%04d}\nspec:\n  files:\n    - path: /etc/infer/config.yaml\n      content: \"threshold: 0.%d\"\n", i, gen))
		}
		r.Commit(fmt.Sprintf("generation %d", gen))
	}
	return r
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkFleetSync measures, on a 1,000-device fleet repo over smart
// HTTP: the first sync of one device (clone + read its folder) against
// `git clone --depth 1 --single-branch`, and a no-op tick against `git
// ls-remote`, and a change tick (one device changed upstream) against `git
// fetch` in the depth-1 git clone, with the bytes the server sent for each.
// Medians of 5.
func BenchmarkFleetSync(b *testing.B) {
	r := fleetRepo(b, 1000)
	srv, sent := countingServer(b, filepath.Dir(r.Dir()))
	url := r.URL(srv.URL)
	src := gitsource.Source{URL: url, Ref: "main", Path: "devices/dev-0500"}
	env := append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1")
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	timed := func(f func()) (time.Duration, int64) {
		before := sent.Load()
		start := time.Now()
		f()
		return time.Since(start), sent.Load() - before
	}
	for b.Loop() {
		var tendSync, gitClone, tendNoop, gitLs, tendChange, gitFetch []time.Duration
		var syncBytes, cloneBytes, noopBytes, lsBytes, changeBytes, fetchBytes int64
		for i := range 5 {
			dir := b.TempDir()
			d, n := timed(func() {
				if _, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: filepath.Join(dir, "tend")}); err != nil {
					b.Fatal(err)
				}
			})
			tendSync, syncBytes = append(tendSync, d), n
			d, n = timed(func() {
				git("clone", "-q", "--depth", "1", "--single-branch", "--branch", "main", url, filepath.Join(dir, "git"))
			})
			gitClone, cloneBytes = append(gitClone, d), n
			d, n = timed(func() {
				snap, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: filepath.Join(dir, "tend")})
				if err != nil || snap.Fetched {
					b.Fatalf("not a no-op: %v", err)
				}
			})
			tendNoop, noopBytes = append(tendNoop, d), n
			d, n = timed(func() { git("ls-remote", url) })
			gitLs, lsBytes = append(gitLs, d), n

			// A change tick: one device's manifest changed upstream.
			r.WriteFile("devices/dev-0500/device.yaml", fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: dev-0500}\nspec: {files: [{path: /etc/infer/x, content: \"%d\"}]}\n", i))
			r.Commit(fmt.Sprintf("change %d", i))
			last := r.Git("rev-parse", "HEAD~1")
			d, n = timed(func() {
				s := src
				s.LastApplied = strings.TrimSpace(last)
				snap, err := gitsource.Fetch(context.Background(), s, gitsource.Options{Dir: filepath.Join(dir, "tend")})
				if err != nil || !snap.Fetched || snap.Stale != nil {
					b.Fatalf("not a change: %v", err)
				}
			})
			tendChange, changeBytes = append(tendChange, d), n
			d, n = timed(func() { git("-C", filepath.Join(dir, "git"), "fetch", "-q", "origin", "main") })
			gitFetch, fetchBytes = append(gitFetch, d), n
		}
		b.ReportMetric(float64(median(tendSync))/float64(median(gitClone)), "sync/clone")
		b.ReportMetric(float64(median(tendNoop))/float64(median(gitLs)), "noop/ls-remote")
		b.ReportMetric(float64(syncBytes), "sync-bytes")
		b.ReportMetric(float64(cloneBytes), "clone-bytes")
		b.ReportMetric(float64(noopBytes), "noop-bytes")
		b.ReportMetric(float64(lsBytes), "ls-remote-bytes")
		b.ReportMetric(float64(median(tendChange))/float64(median(gitFetch)), "change/fetch")
		b.ReportMetric(float64(changeBytes), "change-bytes")
		b.ReportMetric(float64(fetchBytes), "fetch-bytes")
	}
}
