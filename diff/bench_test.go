package diff_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/internal/testkit/testgit"
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

// BenchmarkDiffProfileChange times a diff of a profile change that
// reaches half the fleet: n Device documents in devices/{device}, 100
// profiles in profiles/, one profile's file content changed, selected by
// a label half the devices have. A change of the shared path renders
// every device at base and head, each composed from the profiles parsed
// once per revision. The target is under 10 s at 10,000 devices, and
// linear in devices.
func BenchmarkDiffProfileChange(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) {
			r := testgit.NewRepo(b)
			r.Git("config", "gc.auto", "0")
			profile := func(i int, threshold string) string {
				return fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Profile\nmetadata: {name: p%03d}\nspec:\n"+
					"  selector: {matchLabels: {group: g%d}}\n  files:\n    - {path: /etc/infer/p%03d.yaml, content: \"threshold: %s\"}\n", i, i, i, threshold)
			}
			for i := range 100 {
				r.WriteFile(fmt.Sprintf("profiles/p%03d.yaml", i), profile(i, "0.4"))
			}
			for i := range n {
				name := fmt.Sprintf("dev-%05d", i)
				group := 0 // half the devices: the changed profile's
				if i%2 == 1 {
					group = 1 + i%99
				}
				r.WriteFile("devices/"+name+"/device.yaml", fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata:\n  name: %s\n  labels: {group: g%d}\n"+
					"spec:\n  files:\n    - {path: /etc/infer/own.yaml, content: \"%s\"}\n", name, group, name))
			}
			r.Commit("fleet")
			r.WriteFile("profiles/p000.yaml", profile(0, "0.5"))
			r.Commit("one profile changes")
			r.Git("repack", "-a", "-d", "-q")
			opts := diff.Options{Paths: []string{"profiles", "devices/{device}"}}
			b.ResetTimer()
			var total time.Duration
			runs := 0
			for b.Loop() {
				start := time.Now()
				repo, err := git.PlainOpen(r.Dir())
				if err != nil {
					b.Fatal(err)
				}
				res, err := diff.Run(context.Background(), repo, "HEAD~1", "HEAD", opts)
				if err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				runs++
				if len(res.Devices) != n/2 || res.Rendered != n || len(res.Profiles) != 1 || len(res.Profiles[0].Devices) != n/2 {
					b.Fatalf("got %d devices changed, %d rendered, profiles %d", len(res.Devices), res.Rendered, len(res.Profiles))
				}
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(runs), "ms/diff")
		})
	}
}
