package gitsource

import (
	"time"

	"github.com/tend-dev/tend/internal/backoff"
)

// Tests need no real back-off between retries.
func init() { retryBackoff = backoff.Exponential{Initial: 10 * time.Millisecond, Factor: 1} }
