package notify

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
)

func TestParsePayload(t *testing.T) {
	tests := []struct {
		name, payload, revision string
		malformed               bool
	}{
		{"empty", "", "", false},
		{"revision", `{"revision": "main@sha1:abc"}`, "main@sha1:abc", false},
		{"other fields ignored", `{"revision": "abc", "by": "ci"}`, "abc", false},
		{"no revision", `{}`, "", false},
		{"not json", "merged!", "", true},
		{"not an object", `["abc"]`, "", true},
		{"null", `null`, "", true},
		{"revision not a string", `{"revision": 42}`, "", true},
		{"too long", `{"revision": "` + string(make([]byte, MaxPayload)) + `"}`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePayload([]byte(tt.payload))
			if tt.malformed {
				require.ErrorIs(t, err, ErrMalformed)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.revision, p.Revision)
		})
	}
	p, err := ParsePayload(Payload{Revision: "main@sha1:abc"}.Encode())
	require.NoError(t, err)
	require.Equal(t, "main@sha1:abc", p.Revision)
}

// Without a transport (package notify/mqtt, which cmd/tend imports unless
// built with tend_omit_mqtt) Publish fails saying so, and a Subscriber
// says so in its state.
func TestNoTransport(t *testing.T) {
	cfg := manifest.MQTTNotify{URL: "tcp://127.0.0.1:1", Topic: "t"}
	err := Publish(context.Background(), cfg, Payload{})
	require.ErrorContains(t, err, "mqtt")
	states := make(chan State, 10)
	s := &Subscriber{Config: cfg, Backoff: func(int) time.Duration { return time.Hour }, OnState: func(st State) { states <- st }}
	s.Start(context.Background())
	defer s.Stop()
	st := <-states
	require.False(t, st.Connected)
	require.Equal(t, err.Error(), st.Err.Error())
}
