package agent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/agent/status"
)

// clockT0 is when a fake clock starts.
var clockT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// scrape reads the metrics over HTTP and returns every sample by its name
// and labels as the text format prints them, e.g.
// `tend_reconcile_total{result="noop"}`.
func scrape(t *testing.T, m *status.Metrics) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	samples := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		samples[line[:i]] = v
	}
	return samples
}
