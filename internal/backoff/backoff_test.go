package backoff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestExponential(t *testing.T) {
	tests := []struct {
		name string
		e    Exponential
		want []time.Duration // Delay(1), Delay(2), …
	}{
		{"doubles up to the cap", Exponential{Initial: 10 * time.Second, Max: time.Minute},
			[]time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}},
		{"a factor of its own", Exponential{Initial: 500 * time.Millisecond, Max: 2 * time.Second, Factor: 4},
			[]time.Duration{500 * time.Millisecond, 2 * time.Second, 2 * time.Second}},
		{"no cap", Exponential{Initial: time.Millisecond},
			[]time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []time.Duration
			for n := 1; n <= len(tt.want); n++ {
				got = append(got, tt.e.Delay(n))
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.e.Initial, tt.e.Delay(0))
		})
	}
	require.Equal(t, time.Minute, Exponential{Initial: time.Second, Max: time.Minute}.Delay(1000), "a long streak stays at the cap")
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, Sleep(ctx, time.Hour), context.Canceled, "a cancelled context ends the wait")
	require.NoError(t, Sleep(context.Background(), time.Millisecond))
	require.NoError(t, Sleep(context.Background(), 0))
}
