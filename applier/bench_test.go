package applier_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// BenchmarkObserveFiles observes 1,000 managed files of 4 KiB each.
func BenchmarkObserveFiles(b *testing.B) {
	n := newNode(b)
	content := string(make([]byte, 4096))
	var files []manifest.File
	for i := range 1000 {
		files = append(files, manifest.File{Path: fmt.Sprintf("/etc/infer/d%02d/f%04d", i%20, i), Content: content})
	}
	dev := device(files...)
	n.reconcile(b, dev, "rev1")
	tick, _ := n.plan(b, dev, "rev1")
	d := tick.Desired
	ctx := context.Background()

	b.ResetTimer()
	for b.Loop() {
		obs, err := tick.Applier.Observe(ctx, d)
		if err != nil {
			b.Fatal(err)
		}
		if cs, _ := planner.Plan(d.Desired, obs, planner.Options{}); !cs.Empty() {
			b.Fatal("plan not empty")
		}
	}
}
