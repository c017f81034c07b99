package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/manifest"
)

// BenchmarkNoopTick times one agent tick on a converged node (nothing new
// upstream, no drift): what a device pays every 30s, without the process
// start of a one-shot `tend apply`. It reports the ratio to the median of 5
// `git ls-remote` runs of the same repo.
func BenchmarkNoopTick(b *testing.B) {
	repo := testgit.NewRepo(b)
	doc := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n  files:\n"
	for i := range 20 {
		doc += fmt.Sprintf("    - {path: /etc/infer/f%02d.yaml, content: \"value: %d\"}\n", i, i)
	}
	repo.WriteFile("devices/cam-017/device.yaml", doc)
	repo.Commit("fleet")
	srv := testgit.StartHTTP(b, filepath.Dir(repo.Dir()))

	for name, url := range map[string]string{"local": repo.Dir(), "http": repo.URL(srv.URL)} {
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			c := &manifest.AgentConfig{Device: "cam-017", Source: manifest.SourceConfig{URL: url, Path: "devices/{device}"},
				StateDir: filepath.Join(dir, "state"), Root: filepath.Join(dir, "root"), AllowPaths: []string{"/etc/infer"}}
			c.SetDefaults("")
			if err := os.MkdirAll(c.Root, 0o755); err != nil {
				b.Fatal(err)
			}
			r := &Reconciler{Config: c}
			if _, err := r.Apply(context.Background()); err != nil {
				b.Fatal(err)
			}
			var ls []time.Duration
			for range 5 {
				start := time.Now()
				if out, err := exec.Command("git", "ls-remote", url).CombinedOutput(); err != nil {
					b.Fatalf("git ls-remote: %v\n%s", err, out)
				}
				ls = append(ls, time.Since(start))
			}
			slices.Sort(ls)
			b.ResetTimer()
			for b.Loop() {
				res, err := r.Apply(context.Background())
				if err != nil || len(res.Applied) > 0 {
					b.Fatalf("not a no-op: %v %v", err, res.Applied)
				}
			}
			perTick := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(ls[2].Microseconds())/1000, "ls-remote-ms")
			b.ReportMetric(float64(perTick)/float64(ls[2]), "ratio")
		})
	}
}

// BenchmarkNoopTickProfileFleet is BenchmarkNoopTick on a fleet repo of
// 10,000 device folders and 100 profiles, read through
// paths [profiles, devices/{device}]: a device reads the profiles and its
// own folder, so its tick does not grow with the fleet.
func BenchmarkNoopTickProfileFleet(b *testing.B) {
	repo := testgit.NewRepo(b)
	for i := range 100 {
		repo.WriteFile(fmt.Sprintf("profiles/p%03d.yaml", i), fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Profile\n"+
			"metadata: {name: p%03d}\nspec:\n  selector: {matchLabels: {site: s%d}}\n  priority: %d\n  vars: {t: \"0.%d\"}\n"+
			"  files:\n    - {path: /etc/infer/p%03d.yaml, content: \"t: ${var:t} on ${device}\"}\n", i, i%10, i, i%10, i))
	}
	for i := range 10000 {
		repo.WriteFile(fmt.Sprintf("devices/cam-%05d/device.yaml", i), fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Device\n"+
			"metadata:\n  name: cam-%05d\n  labels: {site: s%d}\nspec:\n  files:\n    - {path: /etc/infer/own.yaml, content: \"cam %d\"}\n", i, i%10, i))
	}
	repo.Commit("fleet")
	dir := b.TempDir()
	c := &manifest.AgentConfig{Device: "cam-00042", Source: manifest.SourceConfig{URL: repo.Dir(), Paths: []string{"profiles", "devices/{device}"}},
		StateDir: filepath.Join(dir, "state"), Root: filepath.Join(dir, "root"), AllowPaths: []string{"/etc/infer"}}
	c.SetDefaults("")
	if err := os.MkdirAll(c.Root, 0o755); err != nil {
		b.Fatal(err)
	}
	r := &Reconciler{Config: c}
	res, err := r.Apply(context.Background())
	if err != nil || len(res.Applied) != 11 {
		b.Fatalf("first apply: %v, %d applied", err, len(res.Applied))
	}
	b.ResetTimer()
	for b.Loop() {
		res, err := r.Apply(context.Background())
		if err != nil || len(res.Applied) > 0 {
			b.Fatalf("not a no-op: %v %v", err, res.Applied)
		}
	}
}
