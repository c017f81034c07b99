package status

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
)

func TestStatusTextNotify(t *testing.T) {
	now := tickT0.Add(5*time.Minute + 42*time.Second)
	var out bytes.Buffer
	for _, n := range []*Notify{
		{Broker: "ssl://broker.example.com:8883", Topic: "tend/fleet/main", Connected: true, Since: "2026-03-01T12:00:00Z"},
		{Broker: "ssl://broker.example.com:8883", Topic: "tend/fleet/main", Since: "2026-03-01T12:04:00Z",
			Error: "cannot reach MQTT broker ssl://broker.example.com:8883: dial tcp: connection refused; check the URL and that the broker runs and listens there"},
	} {
		s := Status{Device: "cam-017", AppliedRevision: "main@sha1:aaa", LastReconcile: "2026-03-01T12:05:00Z", LastSuccess: "2026-03-01T12:05:00Z",
			Result: ResultNoop, Notify: n}
		require.NoError(t, WriteText(&out, s, now))
		out.WriteString("---\n")
	}
	golden.Assert(t, "status-notify.golden", out.Bytes())
}
