package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
)

// A commit that changes only later-wave devices: the canary takes it with
// no change (its release stays commit1, its revision moves), the later
// device's release is commit:2222…. The canary runs that commit, and the
// brakes count it as applied from the report that first showed it there.
// The commit is a release because the later device takes it; a commit
// that changes no device is none.
func TestVerdictCountsACommitThatChangedNothingOnTheCanary(t *testing.T) {
	commit2, commit3 := api.RevisionRelease(rev2), api.RevisionRelease(rev3)
	soak := api.Thresholds{MaxFailed: intp(0), MinApplied: 1, Soak: 10 * time.Minute}
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		canary, later := h.token("cam-0"), h.token("cam-1")
		res := detector("1.0.0", digest100)
		h.report(canary, h.agentDoc("cam-0", 0, rev1, commit1, rev1, commit1, res))
		h.report(later, h.agentDoc("cam-1", 1, rev1, commit1, rev1, commit1, res))
		t0 := h.clock.now()
		verdict := func() BrakesVerdict {
			t.Helper()
			v, err := h.store.Verdict(context.Background(), api.VerdictQuery{Release: commit2, Revision: rev2, Before: 1, Thresholds: soak}, h.clock.now())
			require.NoError(t, err)
			return v
		}

		// The canary runs rev2 first, then the later device sees it.
		h.clock.add(time.Minute)
		h.report(canary, h.agentDoc("cam-0", 0, rev2, commit1, rev2, commit1, res))
		h.clock.add(time.Minute)
		held := h.agentDoc("cam-1", 1, rev1, commit1, rev2, commit2, res)
		held.Held, held.Result = "held: brakes: …", api.ResultHeld
		h.report(later, held)

		v := verdict()
		assert.False(t, v.Go)
		assert.Equal(t, 1, v.Devices)
		assert.Equal(t, 1, v.Applied, "the canary runs the commit")
		assert.Equal(t, "0 of 1 wave-0 devices ran main@sha1:222222222222… healthy for 10m0s (minApplied 1)", v.Reason)
		h.clock.add(9 * time.Minute) // 10 minutes after the canary's report at rev2
		v = verdict()
		assert.True(t, v.Go, v.Reason)
		assert.Equal(t, 1, v.Soaked)

		rd, err := h.store.ReleaseDetail(context.Background(), commit2)
		require.NoError(t, err)
		assert.Equal(t, rfc3339(t0.Add(time.Minute).UnixNano()), rd.FirstSeen, "first seen when the canary ran it")
		assert.Equal(t, rev2, rd.Revision)
		assert.Equal(t, res, rd.Resources, "the resources of the device it is a release of")
		assert.Equal(t, map[string]int{StateApplied: 1, StateHeld: 1}, rd.Counts, "the canary is no unreported device")
		assert.Equal(t, ReleaseDevice{Device: "cam-0", State: StateApplied, Wave: intp(0), Applied: rfc3339(t0.Add(time.Minute).UnixNano())}, rd.DeviceParts[0])

		// The later device takes it; then a commit that changes nothing
		// on either: both run it, and it is no release.
		h.report(later, h.agentDoc("cam-1", 1, rev2, commit2, rev2, commit2, res))
		h.clock.add(time.Minute)
		h.report(canary, h.agentDoc("cam-0", 0, rev3, commit1, rev3, commit1, res))
		h.report(later, h.agentDoc("cam-1", 1, rev3, commit2, rev3, commit2, res))
		rels, err := h.store.Releases(context.Background(), 10)
		require.NoError(t, err)
		var listed []string
		for _, r := range rels {
			listed = append(listed, r.Key)
		}
		assert.Equal(t, []string{string(commit2), string(commit1)}, listed)
		_, err = h.store.FindRelease(context.Background(), rev3)
		assert.True(t, errors.Is(err, ErrNotFound), "%v", err)
		assert.Equal(t, map[string]string{"cam-0": StateApplied, "cam-1": StateApplied}, h.parts(commit2))
		v, err = h.store.Verdict(context.Background(), api.VerdictQuery{Release: commit3, Revision: rev3, Before: 1, Thresholds: api.Thresholds{MinApplied: 1}}, h.clock.now())
		require.NoError(t, err)
		assert.True(t, v.Go, "the canary runs rev3: %s", v.Reason)

		m := h.metrics()
		assert.Equal(t, 1.0, m[`tend_hub_release_convergence_seconds_count`], "the later device converged; running a commit that changed nothing is no convergence")
		assert.Equal(t, 10*60.0, m[`tend_hub_release_convergence_seconds_sum`], "from the canary's report at rev2")
		var dd DeviceDetail
		h.getJSON("/v1/devices/cam-0", &dd)
		var events []string
		for _, e := range dd.Events {
			events = append(events, e.Kind+" "+e.Revision+" "+e.Release)
		}
		assert.Equal(t, []string{
			"applied " + rev3 + " " + string(commit1),
			"applied " + rev2 + " " + string(commit1),
			"first seen " + rev1 + " " + string(commit1),
		}, events, "one applied event a revision")
	})
}

// The verdict on a model's release in waves where no device declares the
// model: an empty wave, skipped as hawkBit skips an empty rollout group.
// A device declares it when its last report's target has the model; one
// that does counts whether it reported the release or not. Each case has
// its own devices and its own model, on one hub.
func TestVerdictOnAModelNoEarlierDeviceDeclares(t *testing.T) {
	th := api.Thresholds{MaxFailed: intp(0), MinApplied: 1}
	// with is model m at digest with the fleet's detector, as a target's
	// resources.
	with := func(m, digest string) []api.ReleaseResource {
		return append(detector("1.0.0", digest100), api.ReleaseResource{ID: m, Ref: "registry.example/" + m, Tag: "1", Digest: digest})
	}
	without := detector("1.0.0", digest100)
	cases := []struct {
		name   string
		before int
		// reports are posted in order: device, its wave, and what it
		// runs and targets, for release key of model m.
		reports func(h *testHub, m string, key api.ReleaseKey) []api.Status
		want    BrakesVerdict // Release, Revision and Before filled in
	}{{
		name: "no wave-0 device declares it: go", before: 1,
		reports: func(h *testHub, m string, key api.ReleaseKey) []api.Status {
			held := h.agentDoc("w1", 1, rev1, commit1, rev1, key, with(m, digest110))
			held.Held = "held: brakes: …"
			return []api.Status{h.agentDoc("w0", 0, rev1, commit1, rev1, commit1, without), held}
		},
		want: BrakesVerdict{Go: true, Reason: "no wave-0 device runs model/M; nothing to wait for"},
	}, {
		name: "a wave-0 device declares it and has not reported it: wait", before: 1,
		reports: func(h *testHub, m string, key api.ReleaseKey) []api.Status {
			return []api.Status{h.agentDoc("w0", 0, rev1, commit1, rev1, commit1, with(m, digest100))}
		},
		want: BrakesVerdict{Devices: 1, Reason: "0 of 1 wave-0 devices applied model/M@sha256:1f16bbbbbbbb… (minApplied 1)"},
	}, {
		name: "a wave-0 device runs it: go", before: 1,
		reports: func(h *testHub, m string, key api.ReleaseKey) []api.Status {
			return []api.Status{
				h.agentDoc("w0", 0, rev1, commit1, rev1, commit1, with(m, digest100)),
				h.agentDoc("w0", 0, rev1, key, rev1, key, with(m, digest110)),
				h.agentDoc("w0b", 0, rev1, commit1, rev1, commit1, without),
			}
		},
		want: BrakesVerdict{Go: true, Devices: 1, Applied: 1, Soaked: 1},
	}, {
		name: "none in waves 0-1 declares it: go", before: 2,
		reports: func(h *testHub, m string, key api.ReleaseKey) []api.Status {
			return []api.Status{
				h.agentDoc("w0", 0, rev1, commit1, rev1, commit1, without),
				h.agentDoc("w1", 1, rev1, commit1, rev1, commit1, without),
				h.agentDoc("w2", 2, rev1, commit1, rev1, key, with(m, digest110)),
			}
		},
		want: BrakesVerdict{Go: true, Reason: "no device in waves 0-1 runs model/M; nothing to wait for"},
	}, {
		name: "wave 0 has none, wave 1 one that has not reported it: wait", before: 2,
		reports: func(h *testHub, m string, key api.ReleaseKey) []api.Status {
			return []api.Status{
				h.agentDoc("w0", 0, rev1, commit1, rev1, commit1, without),
				h.agentDoc("w1", 1, rev1, commit1, rev1, commit1, with(m, digest100)),
			}
		},
		want: BrakesVerdict{Devices: 1, Reason: "0 of 1 devices in waves 0-1 applied model/M@sha256:1f16bbbbbbbb… (minApplied 1)"},
	}, {
		name: "a wave-0 device ran it, then its target dropped the model: it does not count", before: 1,
		reports: func(h *testHub, m string, key api.ReleaseKey) []api.Status {
			return []api.Status{
				h.agentDoc("w0", 0, rev1, key, rev1, key, with(m, digest110)),
				h.agentDoc("w0", 0, rev2, api.RevisionRelease(rev2), rev2, api.RevisionRelease(rev2), without),
			}
		},
		want: BrakesVerdict{Go: true, Reason: "no wave-0 device runs model/M; nothing to wait for"},
	}, {
		name: "a wave-0 device rolled it back, then its target dropped the model: still a failure", before: 1,
		reports: func(h *testHub, m string, key api.ReleaseKey) []api.Status {
			failed := h.agentDoc("w0", 0, rev1, commit1, rev1, commit1, with(m, digest100))
			failed.Quarantined = []api.Quarantined{{Release: string(key), Revision: rev1, Reason: "service/infer did not become healthy"}}
			dropped := h.agentDoc("w0", 0, rev2, api.RevisionRelease(rev2), rev2, api.RevisionRelease(rev2), without)
			dropped.Quarantined = failed.Quarantined
			return []api.Status{failed, dropped}
		},
		want: BrakesVerdict{Devices: 1, Failed: 1, Tripped: true, Reason: "1 of 1 wave-0 devices failed model/M@sha256:1f16bbbbbbbb… (maxFailed 0)"},
	}, {
		name: "a wave-0 device moved past it to a newer digest: wait, it declares the model", before: 1,
		reports: func(h *testHub, m string, key api.ReleaseKey) []api.Status {
			newer := api.ReleaseKey(m + "@" + digest120)
			return []api.Status{
				h.agentDoc("w0", 0, rev1, commit1, rev1, key, with(m, digest110)),
				h.agentDoc("w0", 0, rev1, commit1, rev1, newer, with(m, digest120)),
			}
		},
		want: BrakesVerdict{Reason: "0 of 0 wave-0 devices applied model/M@sha256:1f16bbbbbbbb… (minApplied 1)"},
	}}
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		for i, c := range cases {
			model := fmt.Sprintf("model/m%d", i)
			key := api.ReleaseKey(model + "@" + digest110)
			tokens := map[string]string{}
			for _, s := range c.reports(h, model, key) {
				s.Device = fmt.Sprintf("c%d-%s", i, s.Device)
				if tokens[s.Device] == "" {
					tokens[s.Device] = h.token(s.Device)
				}
				h.clock.add(time.Second)
				s.LastReconcile = h.clock.now().Format(time.RFC3339Nano)
				h.report(tokens[s.Device], s)
			}
			got, err := h.store.Verdict(context.Background(), api.VerdictQuery{Release: key, Revision: rev1, Before: c.before, Thresholds: th}, h.clock.now())
			require.NoError(t, err)
			want := c.want
			want.Release, want.Revision, want.Before = string(key), rev1, c.before
			want.Reason = strings.ReplaceAll(want.Reason, "model/M", model)
			assert.Equal(t, want, got, c.name)
		}
	})
}

// The brakes' judgement of a release of digests, by each earlier
// device's part and whether its target declares the release's models.
func TestJudgeADigestRelease(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	applied := brakePart{state: StateApplied, applied: now.Add(-time.Hour).UnixNano(), runs: true, healthy: true}
	undeclared := func(p brakePart) brakePart { p.undeclared = true; return p }
	both := api.DigestRelease([]string{string(model120), "service/infer@" + digest100})
	th := api.Thresholds{MinApplied: 1}
	for _, c := range []struct {
		name   string
		key    api.ReleaseKey
		before int
		parts  []brakePart
		want   BrakesVerdict
	}{
		{"no earlier device", model120, 1, nil, BrakesVerdict{Go: true, Reason: "no wave-0 device runs model/detector; nothing to wait for"}},
		{"of two waves, two resources", both, 2, nil, BrakesVerdict{Go: true, Reason: "no device in waves 0-1 runs model/detector or service/infer; nothing to wait for"}},
		{"unreported counts, not applied", model120, 1, []brakePart{applied, {state: StateUnreported}}, BrakesVerdict{Go: true, Devices: 2, Applied: 1, Soaked: 1}},
		{"only unreported: wait", model120, 1, []brakePart{{state: StateUnreported}}, BrakesVerdict{Devices: 1, Reason: "0 of 1 wave-0 devices applied model/detector@sha256:cccccccccccc… (minApplied 1)"}},
		{"an undeclared part does not count", model120, 1, []brakePart{undeclared(brakePart{state: StateApplied})}, BrakesVerdict{Go: true, Reason: "no wave-0 device runs model/detector; nothing to wait for"}},
		{"an undeclared failure counts", model120, 1, []brakePart{undeclared(brakePart{state: StateFailed})}, BrakesVerdict{Devices: 1, Failed: 1, Tripped: true, Reason: "1 of 1 wave-0 devices failed model/detector@sha256:cccccccccccc… (maxFailed 0)"}},
		{"a declared superseded part: wait", model120, 1, []brakePart{{state: StateSuperseded}}, BrakesVerdict{Reason: "0 of 0 wave-0 devices applied model/detector@sha256:cccccccccccc… (minApplied 1)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.want.Release, c.want.Before = string(c.key), c.before
			assert.Equal(t, c.want, judge(c.key, "", c.before, c.parts, th, now))
		})
	}
}
