package hubclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
)

// The client against the hub itself: hub's TestFleetOutput and
// TestFleetReleaseOfATag (the hub's package holds the harness that fills
// one). These cover what the client does whatever the hub answers.

const token = "read-secret-token"

// answering serves h behind the hub's read token, as a hub does.
func answering(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return &Client{URL: srv.URL + "/", Token: token}
}

// A fleet larger than a page is read page by page, with the selector on
// each, into one list.
func TestDevicesReadsEveryPage(t *testing.T) {
	const total = 2*api.MaxPageSize + 5
	var asked []string
	c := answering(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery)
		offset, _ := strconv.Atoi(q.Get("offset"))
		limit, _ := strconv.Atoi(q.Get("limit"))
		l := api.DeviceList{FormatVersion: "1", Selector: q.Get("selector"), Total: total, Offset: offset,
			Counts: map[string]int{api.StateApplied: total}, Devices: []api.Device{}}
		for i := offset; i < min(total, offset+limit); i++ {
			l.Devices = append(l.Devices, api.Device{Name: fmt.Sprintf("cam-%04d", i), State: api.StateApplied})
		}
		json.NewEncoder(w).Encode(l) //nolint:errcheck
	})
	l, err := c.Devices(t.Context(), "site=lyon")
	require.NoError(t, err)
	require.Len(t, l.Devices, total)
	assert.Equal(t, "cam-2004", l.Devices[total-1].Name)
	assert.Equal(t, total, l.Total)
	assert.Equal(t, "site=lyon", l.Selector)
	assert.Equal(t, []string{
		"/v1/devices?limit=1000&offset=0&selector=site%3Dlyon",
		"/v1/devices?limit=1000&offset=1000&selector=site%3Dlyon",
		"/v1/devices?limit=1000&offset=2000&selector=site%3Dlyon",
	}, asked)
}

func TestReleaseEscapesItsName(t *testing.T) {
	c := answering(t, func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(api.ReleaseDetail{ReleaseSummary: api.ReleaseSummary{Key: r.URL.EscapedPath()}}) //nolint:errcheck
	})
	rd, err := c.Release(t.Context(), "model/detector@1.1.0")
	require.NoError(t, err)
	assert.Equal(t, "/v1/releases/model%2Fdetector@1.1.0", rd.Key, "one path segment")
}

// Each error says what failed and what to do.
func TestClientErrors(t *testing.T) {
	c := answering(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/releases/nothing":
			http.Error(w, "release nothing: not found", http.StatusNotFound)
		default:
			w.Write([]byte("<html>a proxy's page</html>")) //nolint:errcheck
		}
	})
	for _, tc := range []struct {
		name string
		c    *Client
		do   func(context.Context, *Client) error
		want string
	}{
		{"not an http URL", &Client{URL: "ftp://x"}, devices, `--hub "ftp://x" is not an http(s) URL: use e.g. https://hub.example:8420`},
		{"no read token", &Client{URL: c.URL}, devices, "the hub " + c.URL + " wants its read token: give --read-token-file FILE"},
		{"an error of the hub", c, release("nothing"), "v1/releases/nothing answered 404: release nothing: not found"},
		{"not JSON", c, devices, "not a hub's answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorContains(t, tc.do(t.Context(), tc.c), tc.want)
		})
	}
}

func devices(ctx context.Context, c *Client) error {
	_, err := c.Devices(ctx, "")
	return err
}

func release(name string) func(context.Context, *Client) error {
	return func(ctx context.Context, c *Client) error {
		_, err := c.Release(ctx, name)
		return err
	}
}

func TestReleaseVerdict(t *testing.T) {
	for _, tc := range []struct {
		name    string
		devices int
		counts  map[string]int
		want    Verdict
	}{
		{"every device applied it", 2, map[string]int{api.StateApplied: 2}, VerdictApplied},
		{"one rolled it back", 3, map[string]int{api.StateApplied: 2, api.StateFailed: 1}, VerdictFailed},
		{"one still held", 3, map[string]int{api.StateApplied: 2, api.StateHeld: 1}, VerdictInProgress},
		{"one not reported", 3, map[string]int{api.StateApplied: 2, api.StateUnreported: 1}, VerdictInProgress},
		{"no device targets it", 0, map[string]int{api.StateSuperseded: 4}, VerdictInProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := api.ReleaseDetail{ReleaseSummary: api.ReleaseSummary{Devices: tc.devices, Counts: tc.counts}}
			assert.Equal(t, tc.want, ReleaseVerdict(rd))
		})
	}
}
