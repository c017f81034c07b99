package transport

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// One token bucket per rate and process: every Options with that
// MaxRate reads through it; none without.
func TestMaxRateSharesOneBucket(t *testing.T) {
	require.Nil(t, Options{}.transport().(stallTransport).limit, "no MaxRate, no cap")
	a := Options{MaxRate: 3 << 20}.transport().(stallTransport).limit
	b := Options{MaxRate: 3 << 20, Insecure: []string{"r.local"}}.transport().(stallTransport).limit
	require.NotNil(t, a)
	require.Same(t, a, b, "the models' and the source's downloads share the bucket")
	require.Equal(t, float64(3<<20), float64(a.Limit()))
	require.Equal(t, 3<<20/10, a.Burst())
	require.Equal(t, minBurst, sharedLimiter(64<<10).Burst())
	require.Equal(t, maxBurst, sharedLimiter(1<<30).Burst())
}
