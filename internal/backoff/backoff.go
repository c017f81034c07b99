package backoff

import (
	"context"
	"time"
)

// Exponential waits Initial after the first failure and Factor times longer
// after each further one, never more than Max. The waits are exact (no
// jitter): callers that need a spread add their own, and tests can count
// on them.
type Exponential struct {
	Initial time.Duration
	Max     time.Duration // 0: no cap
	Factor  float64       // 0 means 2
}

// Delay is the wait after the n-th failure in a row (n ≥ 1; n < 1 waits
// Initial).
func (e Exponential) Delay(n int) time.Duration {
	factor := e.Factor
	if factor <= 0 {
		factor = 2
	}
	d := e.Initial
	for i := 1; i < n && (e.Max <= 0 || d < e.Max); i++ {
		d = time.Duration(float64(d) * factor)
	}
	if e.Max > 0 && d > e.Max {
		d = e.Max
	}
	return d
}

// Sleep waits d, or less when ctx ends first; it returns ctx's error then.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
