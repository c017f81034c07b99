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
// iterations, p50_wait_ms that of the part until Wait returned.
func BenchmarkKillToReplacement(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	in := e.instance("bench", "web")
	p, err := e.rt.Start(ctx, in)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.rt.Stop(ctx, p, 0) })
	var took, waited []time.Duration
	for b.Loop() {
		done := e.waitAsync(p)
		t0 := time.Now()
		if err := unix.Kill(p.PID, unix.SIGKILL); err != nil {
			b.Fatal(err)
		}
		if res := <-done; res.err != nil || res.st.Signal != "killed" {
			b.Fatalf("wait: %v (%s)", res.err, res.st)
		}
		waited = append(waited, time.Since(t0))
		p, err = e.rt.Start(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
		if !e.rt.Alive(p) {
			b.Fatal("replacement not running")
		}
	}
	b.ReportMetric(p50ms(took), "p50_ms")
	b.ReportMetric(p50ms(waited), "p50_wait_ms")
}

// p50ms is the median of d in milliseconds.
func p50ms(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)/2].Microseconds()) / 1000
}
