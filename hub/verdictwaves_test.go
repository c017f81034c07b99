package hub

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/rollout"
)

// A commit that changes only later-wave devices: the canary takes it with
// no change (its release stays commit1, its revision moves), the later
// device's release is commit:2222…. The canary runs that commit, and the
// brakes count it as applied from the report that first showed it there.
// The commit is a release because the later device takes it; a commit
// that changes no device is none.
func TestVerdictCountsACommitThatChangedNothingOnTheCanary(t *testing.T) {
	commit2, commit3 := api.RevisionRelease(rev2), api.RevisionRelease(rev3)
	soak := rollout.Thresholds{MaxFailed: intp(0), MinApplied: 1, Soak: 10 * time.Minute}
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		canary, later := h.token("cam-0"), h.token("cam-1")
		res := detector("1.0.0", digest100)
		h.report(canary, h.agentDoc("cam-0", 0, rev1, commit1, rev1, commit1, res))
		h.report(later, h.agentDoc("cam-1", 1, rev1, commit1, rev1, commit1, res))
		t0 := h.clock.now()
		verdict := func() BrakesVerdict {
			t.Helper()
			v, err := h.store.Verdict(context.Background(), rollout.VerdictQuery{Release: commit2, Revision: rev2, Before: 1, Thresholds: soak}, h.clock.now())
			require.NoError(t, err)
			return v
		}

		// The canary runs rev2 first, then the later device sees it.
		h.clock.add(time.Minute)
		h.report(canary, h.agentDoc("cam-0", 0, rev2, commit1, rev2, commit1, res))
		h.clock.add(time.Minute)
		held := h.agentDoc("cam-1", 1, rev1, commit1, rev2, commit2, res)
		held.Held, held.Result = "held: brakes: …", status.ResultHeld
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
		v, err = h.store.Verdict(context.Background(), rollout.VerdictQuery{Release: commit3, Revision: rev3, Before: 1, Thresholds: rollout.Thresholds{MinApplied: 1}}, h.clock.now())
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
