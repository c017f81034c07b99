package agent

import (
	"testing"
	"time"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/internal/testkit/promtext"
)

// clockT0 is when a fake clock starts.
var clockT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// scrape reads the metrics over HTTP (see promtext.Scrape).
func scrape(t *testing.T, m *status.Metrics) map[string]float64 {
	t.Helper()
	return promtext.Scrape(t, m.Handler())
}
