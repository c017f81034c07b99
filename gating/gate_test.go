package gating

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// A gate answers for itself: a redirect to another origin holds the
// release, as does a gate at a link-local address (a cloud's metadata
// service); a redirect within the gate's origin is followed.
func TestGateRefusesOtherOriginsAndLinkLocal(t *testing.T) {
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer elsewhere.Close()
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, elsewhere.URL+"/ok", http.StatusFound)
		case "/moved":
			http.Redirect(w, r, "/ok", http.StatusFound)
		}
	}))
	defer gate.Close()
	askGate := func(u string) string {
		why, _ := getGate(context.Background(), u, gateTimeout)
		return why
	}
	require.Empty(t, askGate(gate.URL+"/moved"), "a redirect within the gate's origin")
	require.Contains(t, askGate(gate.URL+"/away"),
		"redirected to another origin, "+elsewhere.URL+"; a gate answers itself")
	// Refused before any packet is sent: the dialer's check runs before connect.
	require.Contains(t, askGate("http://169.254.169.254/latest/meta-data"),
		"169.254.169.254 is a link-local address; a gate may not be there")
}
