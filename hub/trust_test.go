package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/rollout"
)

// trustFleet is a fleet repo of two rollouts: cameras, the canary first
// (by its label in Git), and robots, one wave.
var trustFleet = []manifest.Input{
	{Name: "rollouts.yaml", Data: []byte(`apiVersion: tend.dev/v1alpha1
kind: Rollout
metadata: {name: cameras}
spec:
  selector: {matchLabels: {type: camera}}
  waves:
    - selector: {matchLabels: {ring: canary}}
    - {percent: 100}
  brakes: {hub: "https://hub.example", maxFailed: 0}
---
apiVersion: tend.dev/v1alpha1
kind: Rollout
metadata: {name: robots}
spec:
  selector: {matchLabels: {type: robot}}
`)},
	{Name: "devices/cam-0.yaml", Data: []byte("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-0, labels: {type: camera, ring: canary}}\n")},
	{Name: "devices/cam-1.yaml", Data: []byte("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-1, labels: {type: camera}}\n")},
	{Name: "devices/cam-2.yaml", Data: []byte("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-2, labels: {type: camera}}\n")},
	{Name: "devices/robot-0.yaml", Data: []byte("apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: robot-0, labels: {type: robot}}\n")},
}

// One device's reports cannot trip or release the brakes of a rollout it
// is not in, nor move its own part in a release to another wave: without
// --fleet-source the first wave and rollout reported for a release stay
// (trust on first use); with it, the hub's own placement counts and a
// report that disagrees is counted inconsistent.
func TestOneDeviceCannotSteerTheBrakes(t *testing.T) {
	rel := api.RevisionRelease(rev2)
	th := api.Thresholds{MaxFailed: intp(0), MinApplied: 1}
	res := detector("1.0.0", digest100)
	for _, checked := range []bool{false, true} {
		name := "reported"
		if checked {
			name = "fleet-source"
		}
		t.Run(name, func(t *testing.T) {
			stores(t, func(t *testing.T, dbURL string) {
				h := newTestHub(t, dbURL)
				if checked {
					fl, err := manifest.ReadFleetLabels(trustFleet)
					require.NoError(t, err)
					h.srv.opts.Fleet = &Fleet{}
					h.srv.opts.Fleet.Update(rev1, fl)
				}
				doc := func(device, ro string, wave int, applied api.ReleaseKey, appliedRev string, target api.ReleaseKey, targetRev string) api.Status {
					s := h.agentDoc(device, wave, appliedRev, applied, targetRev, target, res)
					s.Rollout = ro
					return s
				}
				tok := map[string]string{}
				for _, d := range []string{"cam-0", "cam-1", "cam-2", "robot-0"} {
					tok[d] = h.token(d)
				}
				verdict := func(ro string) BrakesVerdict {
					t.Helper()
					v, err := h.store.Verdict(context.Background(), api.VerdictQuery{Release: rel, Revision: rev2, Rollout: ro, Before: 1, Thresholds: th}, h.clock.now())
					require.NoError(t, err)
					return v
				}
				h.report(tok["cam-0"], doc("cam-0", "cameras", 0, rel, rev2, rel, rev2))
				h.report(tok["cam-1"], doc("cam-1", "cameras", 1, commit1, rev1, rel, rev2))
				h.report(tok["robot-0"], doc("robot-0", "robots", 0, commit1, rev1, commit1, rev1))
				v := verdict("cameras")
				require.True(t, v.Go, v.Reason)
				require.Equal(t, 1, v.Devices)

				// A device of another rollout says it rolled the release back.
				robot := doc("robot-0", "robots", 0, commit1, rev1, commit1, rev1)
				robot.Quarantined = []api.Quarantined{{Release: rev2, Revision: rev2, Reason: "made up"}}
				h.report(tok["robot-0"], robot)
				v = verdict("cameras")
				assert.True(t, v.Go, "a failure in robots does not stop cameras: %s", v.Reason)
				assert.Equal(t, 0, v.Failed)
				assert.True(t, verdict("").Tripped, "a tend that names no rollout is counted across rollouts, as before")

				// A later-wave device of the rollout says it is in wave 0 and
				// rolled the release back, then that it runs another.
				liar := doc("cam-1", "cameras", 0, commit1, rev1, rel, rev2)
				liar.Quarantined = []api.Quarantined{{Release: rev2, Revision: rev2, Reason: "made up"}}
				h.report(tok["cam-1"], liar)
				v = verdict("cameras")
				assert.True(t, v.Go, "cam-1 took part in the release in wave 1: %s", v.Reason)
				assert.Equal(t, 0, v.Failed)
				assert.Equal(t, 1, v.Devices)

				// The canary fails it: the brakes trip, and no report of
				// another device releases them.
				canary := doc("cam-0", "cameras", 0, commit1, rev1, commit1, rev1)
				canary.Quarantined = []api.Quarantined{{Release: rev2, Revision: rev2, Reason: "service web: health check failed"}}
				h.report(tok["cam-0"], canary)
				require.True(t, verdict("cameras").Tripped)
				h.report(tok["cam-1"], doc("cam-1", "cameras", 0, rel, rev2, rel, rev2))
				h.report(tok["cam-2"], doc("cam-2", "cameras", 0, rel, rev2, rel, rev2))
				v = verdict("cameras")
				assert.True(t, v.Tripped, "a wave-0 success claimed by later devices does not release the brakes")
				assert.Equal(t, 1, v.Failed)

				m := h.metrics()
				if checked {
					assert.Equal(t, 3.0, m[`tend_hub_reports_total{result="inconsistent"}`], "cam-1 twice and cam-2 said wave 0")
					var dd DeviceDetail
					h.getJSON("/v1/devices/cam-2", &dd)
					require.NotNil(t, dd.Device.Wave)
					assert.Equal(t, 1, *dd.Device.Wave, "the hub's wave, not the report's")
					assert.Equal(t, "cameras", dd.Device.Rollout)
				} else {
					assert.Equal(t, 0.0, m[`tend_hub_reports_total{result="inconsistent"}`])
					var dd DeviceDetail
					h.getJSON("/v1/devices/cam-1", &dd)
					require.NotNil(t, dd.Device.Wave)
					assert.Equal(t, 1, *dd.Device.Wave, "the wave first reported for the release it works towards")
				}
			})
		})
	}
}

// The hub places a device as its agent would, from the labels of its
// Device documents over those it trusts from elsewhere: a device in no
// rollout, or in two, is in none.
func TestFleetPlace(t *testing.T) {
	f := &Fleet{}
	_, ok := f.Place("cam-0", nil)
	require.False(t, ok, "nothing known before the first read")
	fl, err := manifest.ReadFleetLabels(trustFleet)
	require.NoError(t, err)
	f.Update(rev1, fl)
	for device, want := range map[string]Placement{
		"cam-0":   {Rollout: "cameras", Wave: 0, Checked: true},
		"cam-1":   {Rollout: "cameras", Wave: 1, Checked: true},
		"robot-0": {Rollout: "robots", Wave: 0, Checked: true},
		"ghost":   {Wave: rollout.NoWave, Checked: true},
	} {
		got, ok := f.Place(device, nil)
		require.True(t, ok)
		assert.Equal(t, want, got, device)
	}
	got, _ := f.Place("ghost", map[string]string{"type": "camera", "ring": "canary"})
	assert.Equal(t, Placement{Rollout: "cameras", Wave: 0, Checked: true}, got, "enrolled labels count")
	got, _ = f.Place("cam-1", map[string]string{"ring": "canary", "type": "robot"})
	assert.Equal(t, Placement{Rollout: "cameras", Wave: 0, Checked: true}, got, "Git's labels win over enrolled ones")
	fl.Rollouts = append(fl.Rollouts, &manifest.Rollout{Metadata: manifest.ProfileMetadata{Name: "all"}, Spec: manifest.RolloutSpec{Selector: &manifest.Selector{}}})
	f.Update(rev2, fl)
	got, _ = f.Place("cam-0", nil)
	assert.Equal(t, Placement{Wave: rollout.NoWave, Checked: true}, got, "two rollouts select it")
	assert.Equal(t, rev2, f.Revision())
}

// A report lists at most 64 quarantined releases, and a device that makes
// up releases report after report keeps its part in at most KeepReleases
// of them: the rows a report reads, and the hub's share of the device,
// stay bounded, and the releases no device takes part in go.
func TestReportsAndReleasesAreBounded(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		h.store.KeepReleases = 80
		tok := h.token("cam-9")
		made := func(n, from int) []api.Quarantined {
			qs := make([]api.Quarantined, n)
			for i := range qs {
				c := fmt.Sprintf("%040x", from+i)
				qs[i] = api.Quarantined{Release: "main@sha1:" + c, Revision: "main@sha1:" + c, Reason: "made up"}
			}
			return qs
		}
		s := h.agentDoc("cam-9", 0, rev1, commit1, rev1, commit1, detector("1.0.0", digest100))
		s.Quarantined = made(api.MaxReportQuarantined+1, 0)
		b, err := json.Marshal(s)
		require.NoError(t, err)
		code, body := h.post(tok, b)
		require.Equal(t, http.StatusBadRequest, code)
		assert.Contains(t, body, "quarantined lists 65 entries, more than 64 a report may")

		for r := range 10 {
			s.Quarantined = made(api.MaxReportQuarantined, r*api.MaxReportQuarantined)
			h.clock.add(time.Second)
			s.LastReconcile = h.clock.now().Format(time.RFC3339Nano)
			h.report(tok, s)
		}
		count := func(q string) int {
			t.Helper()
			var n int
			require.NoError(t, h.store.db.QueryRow(q).Scan(&n))
			return n
		}
		assert.Equal(t, 80, count(`SELECT COUNT(*) FROM device_releases WHERE device = 'cam-9'`))
		assert.Equal(t, 80, count(`SELECT COUNT(*) FROM releases`), "the releases no device takes part in are gone")
		assert.LessOrEqual(t, count(`SELECT COUNT(*) FROM device_parts WHERE device = 'cam-9' AND state = 'failed'`), 80, "a failure of a release trimmed goes with it")
		assert.Equal(t, 1, count(`SELECT COUNT(*) FROM device_releases WHERE device = 'cam-9' AND release_key = '`+string(commit1)+`'`), "what it runs is kept")
		last := made(1, 10*api.MaxReportQuarantined-1)[0].Release
		assert.Equal(t, 1, count(`SELECT COUNT(*) FROM device_releases WHERE device = 'cam-9' AND release_key = '`+string(api.RevisionRelease(last))+`'`), "the newest are kept")
	})
}

// Found in review. Without --fleet-source: a device cannot lower its part
// in a release by naming a new key that holds it, nor put a failure in
// every rollout by leaving its rollout out. With it: the fleet repo's
// placement moves parts recorded before, as reported.
func TestTrustHolesFoundInReview(t *testing.T) {
	th := api.Thresholds{MaxFailed: intp(0), MinApplied: 1}
	trackerD := detector("1.0.0", digest100)[1].Digest
	verdict := func(t *testing.T, h *testHub, key api.ReleaseKey, ro string) api.Verdict {
		t.Helper()
		v, err := h.store.Verdict(context.Background(), api.VerdictQuery{Release: key, Rollout: ro, Before: 1, Thresholds: th}, h.clock.now())
		require.NoError(t, err)
		return v
	}
	doc := func(h *testHub, device, ro string, wave int, applied, target api.ReleaseKey, res []api.ReleaseResource) api.Status {
		s := h.agentDoc(device, wave, rev1, applied, rev1, target, res)
		s.Rollout = ro
		return s
	}
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		canary, liar := h.token("cam-0"), h.token("cam-1")
		h.report(canary, doc(h, "cam-0", "cameras", 0, model110, model110, fleetAt(digest110, trackerD)))
		h.report(liar, doc(h, "cam-1", "cameras", 1, commit1, model110, fleetAt(digest110, trackerD)))
		h.clock.add(time.Minute)
		// A new key holding model110, reported in wave 0, then model110
		// rolled back: the part stays in wave 1, where it was recorded first.
		h.report(liar, doc(h, "cam-1", "cameras", 0, commit1, detectorAndTracker, fleetAt(digest110, digestF)))
		h.clock.add(time.Minute)
		failed := doc(h, "cam-1", "cameras", 0, commit1, commit1, detector("1.0.0", digest100))
		failed.Quarantined = []api.Quarantined{{Release: string(model110), Revision: rev1, Reason: "made up"}}
		h.report(liar, failed)
		v := verdict(t, h, model110, "cameras")
		assert.False(t, v.Tripped, "the part of model110 stays in wave 1: %s", v.Reason)

		// A device of robots leaves its rollout out of a report of a failure.
		robot := h.token("robot-0")
		h.report(robot, doc(h, "robot-0", "robots", 0, commit1, commit1, detector("1.0.0", digest100)))
		h.clock.add(time.Minute)
		quiet := doc(h, "robot-0", "", 0, commit1, commit1, detector("1.0.0", digest100))
		quiet.Quarantined = []api.Quarantined{{Release: string(model110), Revision: rev1, Reason: "made up"}}
		h.report(robot, quiet)
		v = verdict(t, h, model110, "cameras")
		assert.False(t, v.Tripped, "robot-0's failure is in robots: %s", v.Reason)
		assert.Equal(t, "cameras", v.Rollout, "the verdict names its rollout")

		// cam-2 says wave 0 in its first report of model110, a failure:
		// believed on first use. Once the hub reads the fleet repo, which
		// puts cam-2 in wave 1, its next report moves the part there.
		cam2 := h.token("cam-2")
		first := doc(h, "cam-2", "cameras", 0, commit1, commit1, detector("1.0.0", digest100))
		first.Quarantined = []api.Quarantined{{Release: string(model110), Revision: rev1, Reason: "made up"}}
		h.report(cam2, first)
		require.True(t, verdict(t, h, model110, "cameras").Tripped, "trust on first use")
		fl, err := manifest.ReadFleetLabels(trustFleet)
		require.NoError(t, err)
		h.srv.opts.Fleet = &Fleet{}
		h.srv.opts.Fleet.Update(rev1, fl)
		h.clock.add(time.Minute)
		h.report(cam2, first)
		v = verdict(t, h, model110, "cameras")
		assert.False(t, v.Tripped, "cam-2's failure is in wave 1, where the fleet repo puts it: %s", v.Reason)
		assert.Equal(t, 0, v.Failed)
	})
}
