package transport

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// closedAddr is host:port on loopback where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// A registry in registries.insecure is reached over plain HTTP: a failure
// to reach it names that attempt only, not go-containerregistry's https
// attempt before it, and a refused connection says to check host:port
// (a wrong port is not a registry that is down).
func TestReachErrorInsecure(t *testing.T) {
	host := closedAddr(t)
	for _, tc := range []struct {
		name string
		call func(Options) error
	}{
		{"resolve a tag", func(o Options) error { _, err := Resolve(t.Context(), host+"/models/detector:v8", "", o); return err }},
		{"list tags for a policy", func(o Options) error {
			_, err := Resolve(t.Context(), host+"/models/detector", ">=1.0.0", o)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(Options{Insecure: []string{host}})
			require.Error(t, err)
			require.False(t, errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnauthorized), "unreachable, not an answer: %v", err)
			msg := err.Error()
			require.Equal(t, 1, strings.Count(msg, `Get "http://`+host+`/v2/`), msg)
			require.NotContains(t, msg, "https://", msg)
			require.Contains(t, msg, "connection refused (nothing listens on "+host+": check the host and port in the ref)")

			// Not listed: both attempts, as go-containerregistry made
			// them (it falls back to http for loopback), and the hint.
			err = tc.call(Options{})
			require.Contains(t, err.Error(), `Get "https://`+host+`/v2/"`)
			require.Contains(t, err.Error(), "check the host and port in the ref")
		})
	}
}

func TestReachErrorNoSuchHost(t *testing.T) {
	var dns *net.DNSError
	if _, err := net.LookupHost("no-such-host.invalid"); !errors.As(err, &dns) || !dns.IsNotFound {
		t.Skipf("this resolver does not answer that the host does not exist: %v", err)
	}
	_, err := Resolve(t.Context(), "no-such-host.invalid:5000/models/detector:v8", "", Options{Insecure: []string{"no-such-host.invalid:5000"}})
	require.Error(t, err)
	require.Contains(t, err.Error(), "(no such host: check the host in the ref)")
	require.NotContains(t, err.Error(), "https://")
}
