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

	"github.com/tend-dev/tend/internal/testgit"
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
