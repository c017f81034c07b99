package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// BenchmarkNoopApply times a no-op `tend apply` (nothing changed upstream,
// no drift) against `git ls-remote` of the same repo, medians of 5 runs
// each, and reports the ratio. The target is a ratio of at most 1 for
// http, a remote repo as a device has one; local, where ls-remote is one
// small git process and no request, shows tend's fixed costs alone.
func BenchmarkNoopApply(b *testing.B) {
	repo := testgit.NewRepo(b)
	var entries []string
	for i := range 20 {
		entries = append(entries, entry(fmt.Sprintf("/etc/infer/f%02d.yaml", i), fmt.Sprintf("value: %d\n", i), ""))
	}
	repo.WriteFile("devices/cam-017/device.yaml", files(entries...))
	for i := range 50 {
		repo.WriteFile(fmt.Sprintf("devices/other-%02d/device.yaml", i), "x: 1\n")
	}
	repo.Commit("fleet")
	srv := testgit.StartHTTP(b, filepath.Dir(repo.Dir()))

	for name, url := range map[string]string{"local": repo.Dir(), "http": repo.URL(srv.URL)} {
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			flags := []string{"--repo", url, "--device", "cam-017", "--path", "devices/{device}",
				"--root", filepath.Join(dir, "root"), "--state-dir", filepath.Join(dir, "state"),
				"--allow-path", "/etc/infer", "--log-format", "json", "--config", filepath.Join(dir, "none.yaml")}
			mustRun(b, "mkdir", "-p", filepath.Join(dir, "root"))
			mustRun(b, "sh", "-c", "printf 'apiVersion: tend.dev/v1alpha1\\nkind: AgentConfig\\n' > "+filepath.Join(dir, "none.yaml"))
			apply := append([]string{tendBin, "apply"}, flags...)
			mustRun(b, apply...) // the first apply writes the files
			lsRemote := []string{"git", "ls-remote", url}
			for b.Loop() {
				tendMed := median(b, 5, apply)
				gitMed := median(b, 5, lsRemote)
				b.ReportMetric(float64(tendMed.Microseconds())/1000, "apply-ms")
				b.ReportMetric(float64(gitMed.Microseconds())/1000, "ls-remote-ms")
				b.ReportMetric(float64(tendMed)/float64(gitMed), "ratio")
			}
		})
	}
}

func median(b *testing.B, n int, argv []string) time.Duration {
	var ds []time.Duration
	for range n {
		start := time.Now()
		mustRun(b, argv...)
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	return ds[n/2]
}

func mustRun(b *testing.B, argv ...string) {
	b.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		b.Fatalf("%v: %v\n%s", argv, err, out)
	}
}
