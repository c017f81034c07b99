package diff_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/internal/testgit"
)

// BenchmarkDiff times a whole diff (open the repo, find every device at
// both revisions, render and plan the ones that changed) of fleets of
// 1,000 and 10,000 devices in which 10 devices change, in a packed repo
// as a clone has it. The target is under 2 s, and about the same time for
// both sizes: only the folders whose tree changed are read.
func BenchmarkDiff(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) {
			r := testgit.NewRepo(b)
			r.Git("config", "gc.auto", "0") // no gc in the background while timing
			for i := range n {
				name := fmt.Sprintf("dev-%05d", i)
				r.WriteFile("devices/"+name+"/device.yaml", device(name, "threshold: 0.4", true))
			}
			r.Commit("fleet")
			for i := range 10 {
				name := fmt.Sprintf("dev-%05d", i*(n/10))
				r.WriteFile("devices/"+name+"/device.yaml", device(name, "threshold: 0.5", true))
			}
			r.Commit("ten devices change")
			r.Git("repack", "-a", "-d", "-q")
			b.ResetTimer()
			var total time.Duration
			runs := 0
			for b.Loop() {
				start := time.Now()
				repo, err := git.PlainOpen(r.Dir())
				if err != nil {
					b.Fatal(err)
				}
				res, err := diff.Run(context.Background(), repo, "HEAD~1", "HEAD", diff.Options{Path: "devices/{device}"})
				if err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				runs++
				if len(res.Devices) != 10 || res.Rendered != 10 || res.Unchanged != n-10 {
					b.Fatalf("got %d devices changed, %d rendered, %d unchanged", len(res.Devices), res.Rendered, res.Unchanged)
				}
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(runs), "ms/diff")
		})
	}
}
