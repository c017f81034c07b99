package gating

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBrakesTokenGoesOnlyToTheReportHub(t *testing.T) {
	require.True(t, sameOrigin("https://hub.example:8420/v1/reports", "https://HUB.example:8420"))
	require.False(t, sameOrigin("https://hub.example:8420/v1/reports", "https://other.example:8420"))
	require.False(t, sameOrigin("https://hub.example:8420/v1/reports", "http://hub.example:8420"))
}
