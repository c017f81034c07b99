package gitsource

import "time"

// Tests need no real back-off between retries.
func init() { retryDelays = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond} }
