package transport

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
)

// One token bucket per rate and process: every Options with that
// MaxRate reads through it; none without.
func TestMaxRateSharesOneBucket(t *testing.T) {
	require.Nil(t, Options{}.transport().(stallTransport).limit, "no MaxRate, no cap")
	rate, err := manifest.ParseRate("3MiB/s")
	require.NoError(t, err)
	a := Options{MaxRate: rate}.transport().(stallTransport).limit
	b := Options{MaxRate: rate, Insecure: []string{"r.local"}}.transport().(stallTransport).limit
	require.NotNil(t, a)
	require.Same(t, a, b, "the models' and the source's downloads share the bucket")
	require.Equal(t, float64(3<<20), float64(a.Limit()))
	require.Equal(t, 3<<20/10, a.Burst())
	require.Equal(t, minBurst, sharedLimiter(64<<10).Burst())
	require.Equal(t, maxBurst, sharedLimiter(1<<30).Burst())
}
