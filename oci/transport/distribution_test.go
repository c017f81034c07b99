package transport

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testoci"
)

func TestResolveAgainstDistribution(t *testing.T) {
	host := testoci.StartDistribution(t)
	repo := host + "/models/classifier"
	v81 := push(t, repo, "v8.1.0")
	push(t, repo, "v9.0.0")
	opts := Options{Insecure: []string{host}}
	got, err := Resolve(context.Background(), repo, ">=8.0.0 <9", opts)
	require.NoError(t, err)
	require.Equal(t, "v8.1.0", got.Tag)
	require.Equal(t, v81, got.Digest)

	_, err = Resolve(context.Background(), repo+":v7", "", opts)
	require.ErrorIs(t, err, ErrNotFound)
	require.EqualError(t, err, "tag v7 not found in "+repo+"; close tags: v8.1.0, v9.0.0 (2 tags)")
}
