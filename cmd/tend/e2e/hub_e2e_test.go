package e2e

// The hub end to end: real tend agents post their status to a real tend
// hub process, and the fleet page, the JSON and tend fleet show each
// device within a report interval.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/hub"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testhub"
	"github.com/tend-dev/tend/internal/testkit/testpg"
)

// runningHub is a tend-hub process on a free port (see testhub), with
// what the tests of tend ask of it.
type runningHub struct {
	*testhub.Hub
	t                  *testing.T
	url, db, tokenFile string
	exited             chan struct{} // closed when the process has ended
}

// startHub starts tend-hub on db, at addr ("" for a free port).
func startHub(t *testing.T, db, addr string) *runningHub {
	return startHubArgs(t, hubBin, db, addr, nil)
}

// startHubBin starts the tend-hub binary bin.
func startHubBin(t *testing.T, bin, db, addr string, env ...string) *runningHub {
	t.Helper()
	return startHubArgs(t, bin, db, addr, nil, env...)
}

// startHubArgs starts the tend-hub binary bin with more flags.
func startHubArgs(t *testing.T, bin, db, addr string, flags []string, env ...string) *runningHub {
	t.Helper()
	h := testhub.Start(t, bin, db, addr, flags, env...)
	return &runningHub{Hub: h, t: t, url: h.URL, db: h.DB, tokenFile: h.TokenFile, exited: h.Exited}
}

func (h *runningHub) logs() string { return h.Logs() }

// deviceToken makes a token for device with tend-hub token create and
// writes it to a file for report.tokenFile.
func (h *runningHub) deviceToken(device string) string { return h.DeviceToken(device) }

func (h *runningHub) get(path string) string { return h.Get(path) }

// fleetStatus runs tend fleet status --format json.
func (h *runningHub) fleetStatus(selector string) hub.DeviceList {
	h.t.Helper()
	out, errOut, code := tend(h.t, "fleet", "status", "--hub", h.url, "--read-token-file", h.tokenFile, "--format", "json", "--selector", selector)
	require.Equal(h.t, 0, code, errOut)
	var l hub.DeviceList
	require.NoError(h.t, json.Unmarshal([]byte(out), &l), out)
	return l
}

// startReportingAgent starts tend agent for device, with labels, reporting
// to h every interval.
func startReportingAgent(t *testing.T, h *runningHub, repoURL, device, site string, interval time.Duration) *runningAgent {
	t.Helper()
	n := newNode(t, repoURL, "--device", device, "--schedule", "@every 1s")
	cfg := fmt.Sprintf("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\nlabels: {site: %s}\nreport:\n  url: %s/v1/reports\n  interval: %s\n  tokenFile: %s\n",
		site, h.url, interval, h.deviceToken(device))
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(n.root), "none.yaml"), []byte(cfg), 0o644))
	return startAgent(t, n)
}

func deviceDoc(name, content string) string {
	return strings.Replace(files(entry("/etc/infer/config.yaml", content, "")), "name: cam-017", "name: "+name, 1)
}

func TestHubShowsReportingAgents(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, db string }{
		{"sqlite", ""},
		{"postgres", "postgres"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := "sqlite://" + filepath.Join(t.TempDir(), "hub.db")
			if c.db == "postgres" {
				db = testpg.Start(t)
			}
			repo := testgit.NewRepo(t)
			devices := map[string]string{"cam-1": "lyon", "cam-2": "lyon", "cam-3": "oslo"}
			for name := range devices {
				repo.WriteFile("devices/"+name+"/device.yaml", deviceDoc(name, "threshold: 0.4\n"))
			}
			first := repo.Commit("first")
			srv := testgit.StartHTTP(t, filepath.Dir(repo.Dir()))
			h := startHub(t, db, "")
			const interval = 5 * time.Second
			agents := map[string]*runningAgent{}
			for name, site := range devices {
				agents[name] = startReportingAgent(t, h, repo.URL(srv.URL), name, site, interval)
			}
			applied := func(rev string) func() bool {
				return func() bool {
					l := h.fleetStatus("")
					ok := l.Total == len(devices)
					for _, d := range l.Devices {
						ok = ok && d.Applied == rev && d.State == hub.StateApplied && d.Labels["site"] == devices[d.Name]
					}
					return ok
				}
			}
			eventually(t, applied("HEAD@sha1:"+first))
			require.Equal(t, 1, h.fleetStatus("site=oslo").Total)

			page := h.get("/?selector=site%3Dlyon")
			require.Contains(t, page, `<a href="/devices/cam-1">cam-1</a>`)
			require.NotContains(t, page, `cam-3`)

			// A new commit: every device reports it applied within an interval.
			for name := range devices {
				repo.WriteFile("devices/"+name+"/device.yaml", deviceDoc(name, "threshold: 0.5\n"))
			}
			second := "HEAD@sha1:" + repo.Commit("second")
			eventually(t, applied(second))
			out, errOut, code := tend(t, "fleet", "release", second, "--hub", h.url, "--read-token-file", h.tokenFile)
			require.Equal(t, 0, code, "%s%s", out, errOut)
			require.Contains(t, out, "Applied by every device it targets.")

			out, _, code = tend(t, "fleet", "status", "--hub", h.url, "--read-token-file", h.tokenFile)
			require.Equal(t, 0, code)
			require.Contains(t, out, "3 device(s): 3 applied")

			var dd hub.DeviceDetail
			require.NoError(t, json.Unmarshal([]byte(h.get("/v1/devices/cam-1")), &dd))
			kinds := []string{}
			for _, e := range dd.Events {
				kinds = append(kinds, e.Kind)
			}
			require.Equal(t, []string{hub.EventApplied, hub.EventFirstSeen}, kinds)
			require.Contains(t, h.get("/releases/"+second), `<svg id="convergence"`)
			require.Contains(t, h.get("/metrics"), `tend_hub_devices{state="applied"} 3`)

			// The hub killed with kill -9 and started again on its
			// database, at its address: the agents' reports go on.
			h.Kill()
			h2 := startHub(t, db, strings.TrimPrefix(h.url, "http://"))
			agents["cam-2"].stop()
			for name := range devices {
				repo.WriteFile("devices/"+name+"/device.yaml", deviceDoc(name, "threshold: 0.6\n"))
			}
			third := "HEAD@sha1:" + repo.Commit("third")
			eventually(t, func() bool {
				l := h2.fleetStatus("site=oslo")
				return len(l.Devices) == 1 && l.Devices[0].Applied == third
			})
			out, _, code = tend(t, "fleet", "release", third, "--hub", h2.url, "--read-token-file", h2.tokenFile)
			require.Equal(t, 2, code, "cam-2 is stopped: in progress\n%s\n%s", out, h2.logs())
		})
	}
}

// A hub killed (SIGKILL) in the middle of taking a report, after the
// device's row and events are written and before its releases are: the
// database holds the report before it whole, and the agent's next post,
// to the hub started again, is taken.
func TestHubKilledDuringIngest(t *testing.T) {
	t.Parallel()
	crashBin, err := testhub.Build(filepath.Dir(hubBin), "failpoints")
	require.NoError(t, err)
	db := "sqlite://" + filepath.Join(t.TempDir(), "hub.db")
	repo := testgit.NewRepo(t)
	repo.WriteFile("devices/cam-1/device.yaml", deviceDoc("cam-1", "threshold: 0.4\n"))
	first := "HEAD@sha1:" + repo.Commit("first")
	srv := testgit.StartHTTP(t, filepath.Dir(repo.Dir()))
	h := startHubBin(t, crashBin, db, "", "TEND_FAILPOINT=hub:ingest#2")
	startReportingAgent(t, h, repo.URL(srv.URL), "cam-1", "lyon", 2*time.Second)
	select {
	case <-h.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("the hub was not killed at its second report:\n%s", h.logs())
	}
	require.Contains(t, h.logs(), "failpoint hub:ingest#2: killed")

	store, err := hub.Open(t.Context(), db)
	require.NoError(t, err)
	dd, err := store.Device(t.Context(), "cam-1", 10)
	require.NoError(t, err)
	require.Len(t, dd.Events, 1, "the first report's events only: %+v", dd.Events)
	require.Equal(t, dd.Device.FirstSeen, dd.Device.LastSeen, "the device's row is the first report's (the second came %s later)", 2*time.Second)
	rd, err := store.ReleaseDetail(t.Context(), api.RevisionRelease(first))
	require.NoError(t, err)
	require.Equal(t, map[string]int{hub.StateApplied: 1}, rd.Counts)
	require.NoError(t, store.Close())

	h2 := startHub(t, db, strings.TrimPrefix(h.url, "http://"))
	repo.WriteFile("devices/cam-1/device.yaml", deviceDoc("cam-1", "threshold: 0.5\n"))
	second := "HEAD@sha1:" + repo.Commit("second")
	eventually(t, func() bool {
		l := h2.fleetStatus("")
		return l.Total == 1 && l.Devices[0].Applied == second
	})
}

// postReport posts a status document of device, at reportSeq seq of
// epoch e1, with the token in tokenFile, and returns the hub's answer.
func (h *runningHub) postReport(tokenFile, device string, seq uint64) (int, string) {
	h.t.Helper()
	tok, err := os.ReadFile(tokenFile)
	require.NoError(h.t, err)
	body := fmt.Sprintf(`{"formatVersion": "1", "device": %q, "appliedRevision": "main@sha1:%040d", "lastReconcile": "2026-12-03T12:00:00Z",
		"lastError": "", "suspended": false, "resources": [], "services": [], "drift": [], "reportSeq": {"epoch": "e1", "seq": %d}}`, device, seq, seq)
	req, err := http.NewRequest(http.MethodPost, h.url+"/v1/reports", strings.NewReader(body))
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// tend-hub device reset forgets a device: its next report, with the
// token it had and a seq below the last, is taken as its first. An
// unknown device is an error that says so.
func TestHubDeviceReset(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "hub.db")
	h := startHub(t, db, "")
	tok := h.deviceToken("cam-1")
	code, body := h.postReport(tok, "cam-1", 10)
	require.Equal(t, http.StatusOK, code, body)
	code, body = h.postReport(tok, "cam-1", 9)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, `{"result":"replayed"}`, body, "seq 9 after 10")

	out, errOut, code := testhub.Run(t, hubBin, nil, "device", "reset", "cam-1", "--db", db)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Device cam-1 reset: its next report is taken as its first. Its tokens are kept.\n", out)
	require.Equal(t, 0, h.fleetStatus("").Total, "the hub has no report of it")

	code, body = h.postReport(tok, "cam-1", 9)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, `{"result":"accepted"}`, body, "its token is valid, and seq 9 is its first report now")
	l := h.fleetStatus("")
	require.Equal(t, 1, l.Total)
	require.Equal(t, fmt.Sprintf("main@sha1:%040d", 9), l.Devices[0].Applied)

	_, errOut, code = testhub.Run(t, hubBin, nil, "device", "reset", "cam-404", "--db", db)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `Error: device "cam-404": `+db+` has no report of it, nothing to reset`)
}
