package hub

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
)

const rev3 = "main@sha1:3333333333333333333333333333333333333333"

var (
	// Digests of model/detector: 1.0.0 runs everywhere, 1.1.0 is bad,
	// 1.2.0 the fix.
	digest100 = "sha256:" + strings.Repeat("0", 64)
	digest110 = "sha256:1f16" + strings.Repeat("b", 60)
	digest120 = "sha256:" + strings.Repeat("c", 64)

	commit1  = api.RevisionRelease(rev1)
	model110 = api.ReleaseKey("model/detector@" + digest110)
	model120 = api.ReleaseKey("model/detector@" + digest120)
)

// detector is model/detector resolved through tag at digest, with the
// fleet's other two models, as a device reports its release's resources.
func detector(tag, digest string) []api.ReleaseResource {
	return []api.ReleaseResource{
		{ID: "model/detector", Ref: "registry.example/detector", Tag: tag, Digest: digest},
		{ID: "model/tracker", Ref: "registry.example/tracker", Tag: "2.0.0", Digest: "sha256:" + strings.Repeat("d", 64)},
		{ID: "model/reid", Ref: "registry.example/reid", Tag: "0.9.1", Digest: "sha256:" + strings.Repeat("e", 64)},
	}
}

// agentDoc is the status document of a tend that reports release keys:
// device of wave runs applied (at appliedRev) and works towards target
// (at targetRev; the applied one when none waits).
func (h *testHub) agentDoc(device string, wave int, appliedRev string, applied api.ReleaseKey, targetRev string, target api.ReleaseKey, res []api.ReleaseResource) api.Status {
	s := h.doc(device, appliedRev, targetRev)
	s.Wave = &wave
	s.AppliedRelease = string(applied)
	s.Release = &api.Release{Key: string(target), Revision: targetRev, Resources: res}
	return s
}

// parts is each device's part in release key.
func (h *testHub) parts(key api.ReleaseKey) map[string]string {
	h.t.Helper()
	rd, err := h.store.ReleaseDetail(context.Background(), key)
	require.NoError(h.t, err)
	out := map[string]string{}
	for _, p := range rd.DeviceParts {
		out[p.Device] = p.State
	}
	return out
}

// A device's part in each release and the brakes' verdict, by release key,
// through the scenario: a retrained model pushed as a tag, bad,
// then fixed; an unrelated commit during a soak; commits as before.
func TestReleaseKeys(t *testing.T) {
	soak := api.Thresholds{MaxFailed: intp(0), MinApplied: 1, Soak: 20 * time.Second}
	type step struct {
		name string
		wait time.Duration // on the hub's clock, before the reports
		// reports are the status documents posted, in order.
		reports func(h *testHub) []api.Status
		// parts are each device's part in a release after them.
		parts map[api.ReleaseKey]map[string]string
		// verdicts asked by a wave-1 device: the key and the revision it
		// saw it at, and the reason ("" to go).
		verdicts []struct {
			key    api.ReleaseKey
			rev    string
			reason string
		}
		state map[string]string // device states
	}
	type verdict = struct {
		key    api.ReleaseKey
		rev    string
		reason string
	}
	steps := []step{{
		name: "both run 1.0.0 at the first commit",
		reports: func(h *testHub) []api.Status {
			return []api.Status{
				h.agentDoc("cam-0", 0, rev1, commit1, rev1, commit1, detector("1.0.0", digest100)),
				h.agentDoc("cam-1", 1, rev1, commit1, rev1, commit1, detector("1.0.0", digest100)),
			}
		},
		parts: map[api.ReleaseKey]map[string]string{commit1: {"cam-0": StateApplied, "cam-1": StateApplied}},
	}, {
		name: "1.1.0 pushed by tag: the canary stages it, the late device is held at the same commit",
		wait: time.Minute,
		reports: func(h *testHub) []api.Status {
			c := h.agentDoc("cam-0", 0, rev1, commit1, rev1, model110, detector("1.1.0", digest110))
			c.Staging = &api.Staging{Revision: rev1}
			l := h.agentDoc("cam-1", 1, rev1, commit1, rev1, model110, detector("1.1.0", digest110))
			l.Held, l.Result = "held: brakes: 0 of 1 wave-0 devices ran model/detector@sha256:1f16bbbbbbbb… healthy for 20s (minApplied 1)", api.ResultHeld
			return []api.Status{c, l}
		},
		parts: map[api.ReleaseKey]map[string]string{
			model110: {"cam-0": StateStaging, "cam-1": StateHeld},
			commit1:  {"cam-0": StateApplied, "cam-1": StateApplied},
		},
		verdicts: []verdict{{model110, rev1, "0 of 1 wave-0 devices ran model/detector@sha256:1f16bbbbbbbb… healthy for 20s (minApplied 1)"}},
		state:    map[string]string{"cam-0": StateStaging, "cam-1": StateHeld},
	}, {
		name: "the canary takes it and rolls it back: wave 1 stops for 1.1.0, not for the commit",
		wait: 5 * time.Second,
		reports: func(h *testHub) []api.Status {
			c := h.agentDoc("cam-0", 0, rev1, commit1, rev1, commit1, detector("1.0.0", digest100))
			c.Quarantined = []api.Quarantined{{Release: string(model110), Revision: rev1, Tag: "1.1.0", Reason: "service/infer did not become healthy: probe failed 3 times"}}
			return []api.Status{c}
		},
		parts: map[api.ReleaseKey]map[string]string{
			model110: {"cam-0": StateFailed, "cam-1": StateHeld},
			commit1:  {"cam-0": StateApplied, "cam-1": StateApplied},
		},
		verdicts: []verdict{
			{model110, rev1, "1 of 1 wave-0 devices failed model/detector@sha256:1f16bbbbbbbb… (maxFailed 0)"},
			{commit1, rev1, ""},
		},
		state: map[string]string{"cam-0": StateApplied},
	}, {
		name: "1.2.0, the fix, is a new release: it counts afresh, and soaks",
		wait: time.Minute,
		reports: func(h *testHub) []api.Status {
			c := h.agentDoc("cam-0", 0, rev1, model120, rev1, model120, detector("1.2.0", digest120))
			c.Quarantined = []api.Quarantined{{Release: string(model110), Revision: rev1, Tag: "1.1.0", Reason: "service/infer did not become healthy: probe failed 3 times"}}
			return []api.Status{c}
		},
		parts: map[api.ReleaseKey]map[string]string{
			model120: {"cam-0": StateApplied},
			model110: {"cam-0": StateFailed, "cam-1": StateHeld},
		},
		verdicts: []verdict{
			{model120, rev1, "0 of 1 wave-0 devices ran model/detector@sha256:cccccccccccc… healthy for 20s (minApplied 1)"},
			{model110, rev1, "1 of 1 wave-0 devices failed model/detector@sha256:1f16bbbbbbbb… (maxFailed 0)"},
		},
	}, {
		name: "an unrelated commit 10s into the soak: the canary still runs 1.2.0, whose soak goes on",
		wait: 10 * time.Second,
		reports: func(h *testHub) []api.Status {
			c := h.agentDoc("cam-0", 0, rev2, model120, rev2, model120, detector("1.2.0", digest120))
			c.Quarantined = []api.Quarantined{{Release: string(model110), Revision: rev1, Tag: "1.1.0", Reason: "service/infer did not become healthy: probe failed 3 times"}}
			return []api.Status{c}
		},
		parts:    map[api.ReleaseKey]map[string]string{model120: {"cam-0": StateApplied}},
		verdicts: []verdict{{model120, rev2, "0 of 1 wave-0 devices ran model/detector@sha256:cccccccccccc… healthy for 20s (minApplied 1)"}},
	}, {
		name:     "20s after it took 1.2.0, wave 1 goes",
		wait:     10 * time.Second,
		verdicts: []verdict{{model120, rev2, ""}},
	}, {
		name: "a commit that changes the devices is a release as before, counted by its commit",
		wait: time.Minute,
		reports: func(h *testHub) []api.Status {
			c := h.agentDoc("cam-0", 0, rev2, model120, rev3, api.RevisionRelease(rev3), detector("1.2.0", digest120))
			c.Quarantined = []api.Quarantined{{Release: rev3, Revision: rev3, Reason: "service/web did not become healthy"}}
			return []api.Status{c}
		},
		parts: map[api.ReleaseKey]map[string]string{
			api.RevisionRelease(rev3): {"cam-0": StateFailed},
			model120:                  {"cam-0": StateApplied},
		},
		verdicts: []verdict{{api.RevisionRelease(rev3), rev3, "1 of 1 wave-0 devices failed main@sha1:333333333333… (maxFailed 0)"}},
		state:    map[string]string{"cam-0": StateFailed},
	}}
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		tokens := map[string]string{"cam-0": h.token("cam-0"), "cam-1": h.token("cam-1")}
		for _, st := range steps {
			h.clock.add(st.wait)
			if st.reports != nil {
				for _, s := range st.reports(h) {
					h.report(tokens[s.Device], s)
				}
			}
			for key, want := range st.parts {
				assert.Equal(t, want, h.parts(key), "%s: the parts in %s", st.name, key)
			}
			for _, v := range st.verdicts {
				got, err := h.store.Verdict(context.Background(), api.VerdictQuery{Release: v.key, Revision: v.rev, Before: 1, Thresholds: soak}, h.clock.now())
				require.NoError(t, err)
				assert.Equal(t, v.reason, got.Reason, "%s: the verdict on %s", st.name, v.key)
				assert.Equal(t, v.reason == "", got.Go, "%s: the verdict on %s", st.name, v.key)
				assert.Equal(t, string(v.key), got.Release)
			}
			for device, want := range st.state {
				dd, err := h.store.Device(context.Background(), device, 1)
				require.NoError(t, err)
				assert.Equal(t, want, dd.Device.State, "%s: %s", st.name, device)
			}
		}
		rd, err := h.store.ReleaseDetail(context.Background(), model110)
		require.NoError(t, err)
		assert.Equal(t, rev1, rd.Revision)
		assert.Equal(t, detector("1.1.0", digest110), rd.Resources)
		assert.Equal(t, []string{"model/detector 1.1.0"}, rd.Tags())
		require.Len(t, rd.DeviceParts, 2)
		assert.Equal(t, "rolled back model/detector@sha256:1f16bbbbbbbb… (1.1.0): service/infer did not become healthy: probe failed 3 times", rd.DeviceParts[0].Detail)

		var dd DeviceDetail
		h.getJSON("/v1/devices/cam-0", &dd)
		var events []string
		for _, e := range dd.Events {
			events = append(events, e.Kind+" "+e.Release)
		}
		assert.Equal(t, []string{
			"failed commit:3333333333333333333333333333333333333333",
			"applied " + string(model120),
			"applied " + string(model120),
			"failed " + string(model110),
			"staging " + string(model110),
			"first seen " + string(commit1),
		}, events)
	})
}

// A tend that sends no release keys (v0.1.0) is counted by commit: its
// hand-made status document, as that tend posts it, makes releases
// commit:HASH, and the brakes' verdict of its revision query counts them.
func TestOldAgentIsCountedByCommit(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		tok, late := h.token("cam-0"), h.token("cam-1")
		doc := func(device, applied, target, extra string) []byte {
			return []byte(`{"formatVersion": "1", "device": "` + device + `", "version": "v0.1.0", "labels": {"site": "lyon"},
				"appliedRevision": "` + applied + `", "targetRevision": "` + target + `", "lastReconcile": "` + h.clock.now().Format(time.RFC3339Nano) + `",
				"result": "success", "lastError": "", "suspended": false, "resources": [], "services": [], "drift": [], "wave": ` + extra + `}`)
		}
		for _, p := range []struct {
			tok  string
			body []byte
		}{
			{tok, doc("cam-0", rev1, rev1, `0`)},
			{late, doc("cam-1", rev1, rev1, `1`)},
		} {
			code, body := h.post(p.tok, p.body)
			require.Equal(t, http.StatusOK, code, body)
		}
		h.clock.add(time.Minute)
		code, body := h.post(tok, doc("cam-0", rev1, rev2, `0, "quarantined": [{"release": "`+rev2+`", "revision": "`+rev2+`", "reason": "service/web did not become healthy", "at": "2026-12-03T12:01:00Z"}]`))
		require.Equal(t, http.StatusOK, code, body)
		code, body = h.post(late, doc("cam-1", rev1, rev2, `1, "held": "held: brakes: …"`))
		require.Equal(t, http.StatusOK, code, body)

		assert.Equal(t, map[string]string{"cam-0": StateFailed, "cam-1": StateHeld}, h.parts(api.RevisionRelease(rev2)))
		assert.Equal(t, map[string]string{"cam-0": StateApplied, "cam-1": StateApplied}, h.parts(commit1))
		v, err := h.store.Verdict(context.Background(), api.VerdictQuery{Revision: rev2, Before: 1}, h.clock.now())
		require.NoError(t, err)
		assert.True(t, v.Tripped)
		assert.Equal(t, "1 of 1 wave-0 devices failed main@sha1:222222222222… (maxFailed 0)", v.Reason)
		assert.Equal(t, "commit:2222222222222222222222222222222222222222", v.Release)

		var l DeviceList
		h.getJSON("/v1/devices?sort=name", &l)
		require.Len(t, l.Devices, 2)
		assert.Equal(t, StateFailed, l.Devices[0].State)
		assert.Equal(t, "commit:2222222222222222222222222222222222222222", l.Devices[0].TargetRelease)
		assert.Equal(t, "main@sha1:222222222222", l.Devices[0].TargetShown())
		var rd ReleaseDetail
		h.getJSON("/v1/releases/"+rev2, &rd)
		assert.Equal(t, map[string]int{StateFailed: 1, StateHeld: 1}, rd.Counts)
		assert.Equal(t, []api.ReleaseResource{}, rd.Resources)
	})
}

// A bad key, or too many resources, is a malformed report: 400, saying
// which field.
func TestIngestRefusesBadReleases(t *testing.T) {
	h := newTestHub(t, "sqlite://"+t.TempDir()+"/hub.db")
	tok := h.token("cam-0")
	many := make([]api.ReleaseResource, maxReleaseResources+1)
	for i := range many {
		many[i] = api.ReleaseResource{ID: "model/m", Digest: digest100}
	}
	for _, c := range []struct {
		name string
		edit func(*api.Status)
		want string
	}{
		{"bad key", func(s *api.Status) { s.Release = &api.Release{Key: "model/detector@1.2.0", Revision: rev1} }, `release.key: release key "model/detector@1.2.0": part "model/detector@1.2.0" is not a digest's key`},
		{"bad applied key", func(s *api.Status) { s.AppliedRelease = "commit:xyz" }, `appliedRelease: release key "commit:xyz": the commit is not a hash`},
		{"too many resources", func(s *api.Status) {
			s.Release = &api.Release{Key: string(commit1), Revision: rev1, Resources: many}
		}, "release.resources lists 1025 resources, more than 1024"},
		{"long tag", func(s *api.Status) {
			s.Release = &api.Release{Key: string(commit1), Revision: rev1, Resources: []api.ReleaseResource{{ID: "model/m", Tag: strings.Repeat("x", 300)}}}
		}, "release.resources[0].tag of 300 bytes, more than 256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := h.doc("cam-0", rev1, "")
			c.edit(&s)
			code, body := h.post(tok, mustJSON(t, s))
			assert.Equal(t, http.StatusBadRequest, code)
			assert.Contains(t, body, "report of cam-0: "+c.want)
		})
	}
	assert.Equal(t, 4.0, h.metrics()[`tend_hub_reports_total{result="malformed"}`])
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// A device's part in a release, by its keys: the table of partState.
func TestPartState(t *testing.T) {
	tracker := "model/tracker@sha256:" + strings.Repeat("f", 64)
	both := api.DigestRelease([]string{string(model120), tracker})
	quarantined := func(releases ...string) []api.Quarantined {
		var q []api.Quarantined
		for _, r := range releases {
			q = append(q, api.Quarantined{Release: r, Revision: rev1})
		}
		return q
	}
	for _, c := range []struct {
		name string
		s    api.Status
		key  api.ReleaseKey
		want string
	}{
		{"runs it", api.Status{AppliedRevision: rev1, AppliedRelease: string(model120), Release: &api.Release{Key: string(model120), Revision: rev1}}, model120, StateApplied},
		{"a digest release held at the commit it runs is held, not applied", api.Status{AppliedRevision: rev1, TargetRevision: rev1, AppliedRelease: string(commit1), Held: "held: brakes: …",
			Release: &api.Release{Key: string(model110), Revision: rev1}}, model110, StateHeld},
		{"the release it runs while one is held", api.Status{AppliedRevision: rev1, TargetRevision: rev1, AppliedRelease: string(commit1), Held: "held: brakes: …",
			Release: &api.Release{Key: string(model110), Revision: rev1}}, commit1, StateApplied},
		{"staging", api.Status{AppliedRevision: rev1, AppliedRelease: string(commit1), Staging: &api.Staging{Revision: rev1}, Release: &api.Release{Key: string(model110), Revision: rev1}}, model110, StateStaging},
		{"error", api.Status{AppliedRevision: rev1, AppliedRelease: string(commit1), LastError: "boom", Release: &api.Release{Key: string(model110), Revision: rev1}}, model110, StateError},
		{"pending", api.Status{AppliedRevision: rev1, AppliedRelease: string(commit1), Release: &api.Release{Key: string(model110), Revision: rev1}}, model110, StatePending},
		{"one of its digests rolled back", api.Status{AppliedRevision: rev1, AppliedRelease: string(commit1), Release: &api.Release{Key: string(commit1), Revision: rev1}, Quarantined: quarantined(tracker)}, both, StateFailed},
		{"a rolled back digest fails no other release", api.Status{AppliedRevision: rev1, AppliedRelease: string(model120), Release: &api.Release{Key: string(model120), Revision: rev1}, Quarantined: quarantined(string(model110))}, model120, StateApplied},
		{"a rolled back commit (v0.1.0)", api.Status{AppliedRevision: rev1, TargetRevision: rev2, Quarantined: quarantined(rev2)}, api.RevisionRelease(rev2), StateFailed},
		{"a commit it runs (v0.1.0)", api.Status{AppliedRevision: rev1, TargetRevision: rev2, Quarantined: quarantined(rev2)}, commit1, StateApplied},
		{"the commit it runs, which changed nothing on it", api.Status{AppliedRevision: rev2, AppliedRelease: string(model120), Release: &api.Release{Key: string(model120), Revision: rev2}}, api.RevisionRelease(rev2), StateApplied},
		{"neither its target nor what it runs", api.Status{AppliedRevision: rev2, AppliedRelease: string(model120), Release: &api.Release{Key: string(model120), Revision: rev2}}, model110, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, err := keysOf(&c.s)
			require.NoError(t, err)
			got, _ := partState(&c.s, k, c.key)
			assert.Equal(t, c.want, got)
		})
	}
}

// The verdict on a release of two digests counts an earlier device that
// rolled back one of them in a release of that digest alone.
func TestVerdictCountsADigestFailedAlone(t *testing.T) {
	tracker := "model/tracker@sha256:" + strings.Repeat("f", 64)
	both := api.DigestRelease([]string{string(model120), tracker})
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		tok := h.token("cam-0")
		s := h.agentDoc("cam-0", 0, rev1, commit1, rev1, commit1, detector("1.0.0", digest100))
		s.Quarantined = []api.Quarantined{{Release: string(model120), Revision: rev1, Tag: "1.2.0", Reason: "service/infer did not become healthy"}}
		h.report(tok, s)
		assert.Equal(t, map[string]string{"cam-0": StateFailed}, h.parts(model120), "rolled back before any report named it")
		v, err := h.store.Verdict(context.Background(), api.VerdictQuery{Release: both, Revision: rev1, Before: 1, Thresholds: api.Thresholds{MinApplied: 1}}, h.clock.now())
		require.NoError(t, err)
		assert.Equal(t, BrakesVerdict{Release: string(both), Revision: rev1, Before: 1, Devices: 1, Failed: 1, Tripped: true,
			Reason: "1 of 1 wave-0 devices failed model/detector@sha256:cccccccccccc…+model/tracker@sha256:ffffffffffff… (maxFailed 0)"}, v)
	})
}
