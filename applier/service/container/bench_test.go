package container_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkKillToReplacement measures what a supervisor does when a
// container's main process dies: from SIGKILL to the pid, through Wait
// returning its status, to Start returning with a replacement running
// (the image already on the engine). p50_ms is the median of the
// iterations.
func BenchmarkKillToReplacement(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	in := e.instance("bench", "web")
	p, err := e.rt.Start(ctx, in)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.rt.Stop(ctx, p, 0) })
	var took []time.Duration
	for b.Loop() {
		done := e.waitAsync(p)
		t0 := time.Now()
		if err := unix.Kill(p.PID, unix.SIGKILL); err != nil {
			b.Fatal(err)
		}
		if res := <-done; res.err != nil || res.st.Signal != "killed" {
			b.Fatalf("wait: %v (%s)", res.err, res.st)
		}
		p, err = e.rt.Start(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
		if !e.rt.Alive(p) {
			b.Fatal("replacement not running")
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50_ms")
}
