package status

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/planner"
)

// testServer starts a Server on a free port with a trigger whose queue has
// room for one, as the loop's has.
func testServer(t *testing.T) (base string, alive *atomic.Bool, queue chan struct{}) {
	t.Helper()
	tr := NewTracker("cam-017", "v1.2.3")
	tr.Observe(fakeTick{commit: "aaa", actions: []planner.Action{action(planner.Update, "file/etc/infer/a", "drift: content changed on node")}}.result(), nil, "tend suspend")
	alive = &atomic.Bool{}
	alive.Store(true)
	queue = make(chan struct{}, 1)
	trigger := func() bool {
		select {
		case queue <- struct{}{}:
			return true
		default:
			return false
		}
	}
	s := NewServer("127.0.0.1:0", tr, NewMetrics(), trigger, alive.Load, nil)
	addr, err := s.Start(t.Context())
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return "http://" + addr.String(), alive, queue
}

func request(t *testing.T, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func TestServerRoutes(t *testing.T) {
	base, _, _ := testServer(t)
	cases := []struct {
		method, path string
		code         int
		contentType  string
		allow        string
		body         string // contained in the body
	}{
		{"GET", "/healthz", 200, "text/plain", "", "ok\n"},
		{"HEAD", "/healthz", 200, "text/plain", "", ""},
		{"GET", "/status", 200, "application/json", "", `"device": "cam-017"`},
		{"GET", "/metrics", 200, "text/plain", "", `tend_reconcile_total{result="noop"} 0`},
		{"POST", "/healthz", 405, "", "GET, HEAD", ""},
		{"PUT", "/status", 405, "", "GET, HEAD", ""},
		{"DELETE", "/metrics", 405, "", "GET, HEAD", ""},
		{"GET", "/reconcile", 405, "", "POST", ""},
		{"GET", "/nope", 404, "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			resp, body := request(t, c.method, base+c.path)
			require.Equal(t, c.code, resp.StatusCode, body)
			require.Contains(t, resp.Header.Get("Content-Type"), c.contentType)
			require.Equal(t, c.allow, resp.Header.Get("Allow"))
			require.Contains(t, body, c.body)
		})
	}
}

func TestServerStatusIsTheDocument(t *testing.T) {
	base, _, _ := testServer(t)
	_, body := request(t, "GET", base+"/status")
	require.True(t, strings.HasPrefix(body, "{\n  \"formatVersion\": \"1\","), "indented:\n%s", body)
	var s Status
	require.NoError(t, json.Unmarshal([]byte(body), &s))
	require.Equal(t, "cam-017", s.Device)
	require.True(t, s.Suspended)
	require.Equal(t, []ResourceStatus{{ID: "file/etc/infer/a", State: StateDrifted, Message: "drift: content changed on node"}}, s.Resources)
	require.Len(t, s.Drift, 1)
}

func TestServerHealthzFollowsTheLoop(t *testing.T) {
	base, alive, _ := testServer(t)
	resp, _ := request(t, "GET", base+"/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	alive.Store(false)
	resp, body := request(t, "GET", base+"/healthz")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "reconcile loop not running\n", body)
}

func TestServerReconcileQueuesOne(t *testing.T) {
	base, _, queue := testServer(t)
	for _, want := range []string{`{"queued":true}`, `{"queued":false}`, `{"queued":false}`} {
		resp, body := request(t, "POST", base+"/reconcile")
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.JSONEq(t, want, body)
	}
	<-queue // the loop takes the tick
	_, body := request(t, "POST", base+"/reconcile")
	require.JSONEq(t, `{"queued":true}`, body)
}

func TestServerStartFailsOnABusyAddress(t *testing.T) {
	base, _, _ := testServer(t)
	s := NewServer(strings.TrimPrefix(base, "http://"), NewTracker("cam-017", ""), NewMetrics(), nil, nil, nil)
	_, err := s.Start(t.Context())
	require.ErrorContains(t, err, "listen on 127.0.0.1:")
	require.ErrorContains(t, err, "address already in use")
}

func TestServerShutdownStopsServing(t *testing.T) {
	s := NewServer("127.0.0.1:0", NewTracker("cam-017", ""), NewMetrics(), nil, nil, nil)
	addr, err := s.Start(t.Context())
	require.NoError(t, err)
	resp, _ := request(t, "GET", "http://"+addr.String()+"/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	s.Stop()
	_, err = http.Get("http://" + addr.String() + "/healthz")
	require.Error(t, err)
}
