package hub

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
)

var (
	// digestF is a retrained model/tracker, pushed as a tag.
	digestF  = "sha256:" + strings.Repeat("f", 64)
	trackerF = api.ReleaseKey("model/tracker@" + digestF)
	// detectorAndTracker is the key of a later device that sees the
	// canary's two moves at once.
	detectorAndTracker = api.DigestRelease([]string{string(model110), string(trackerF)})
)

// fleetAt is the fleet's three models with the detector at tag 1.1.0 and
// digest det, the tracker at digest trk.
func fleetAt(det, trk string) []api.ReleaseResource {
	r := detector("1.1.0", det)
	r[1].Digest = trk
	return r
}

// verdictOn is the verdict a wave-1 device gets on key, seen at rev.
func (h *testHub) verdictOn(key api.ReleaseKey, rev string, th api.Thresholds) BrakesVerdict {
	h.t.Helper()
	v, err := h.store.Verdict(context.Background(), api.VerdictQuery{Release: key, Revision: rev, Before: 1, Thresholds: th}, h.clock.now())
	require.NoError(h.t, err)
	return v
}

// The canary takes model/detector@A on one tick and model/tracker@F on
// the next; a later device held all along sees both at once, key A+F.
// The canary runs A+F from its report of F, the later of the two: it
// counts applied, soaked from then. Once it moves the detector past A, it
// runs A+F no more.
func TestVerdictCountsAKeyWhoseDigestsTheCanaryTookApart(t *testing.T) {
	th := api.Thresholds{MaxFailed: intp(0), MinApplied: 1, Soak: 10 * time.Minute}
	trackerD := detector("1.0.0", digest100)[1].Digest
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		canary, later := h.token("cam-0"), h.token("cam-1")
		h.report(canary, h.agentDoc("cam-0", 0, rev1, commit1, rev1, commit1, detector("1.0.0", digest100)))
		h.report(later, h.agentDoc("cam-1", 1, rev1, commit1, rev1, commit1, detector("1.0.0", digest100)))
		h.clock.add(time.Minute)
		h.report(canary, h.agentDoc("cam-0", 0, rev1, model110, rev1, model110, fleetAt(digest110, trackerD)))
		h.clock.add(time.Minute)
		h.report(canary, h.agentDoc("cam-0", 0, rev1, trackerF, rev1, trackerF, fleetAt(digest110, digestF)))
		held := h.agentDoc("cam-1", 1, rev1, commit1, rev1, detectorAndTracker, fleetAt(digest110, digestF))
		held.Held, held.Result = "held: brakes: …", api.ResultHeld
		h.report(later, held)

		h.clock.add(9 * time.Minute)
		v := h.verdictOn(detectorAndTracker, rev1, th)
		assert.Equal(t, BrakesVerdict{Release: string(detectorAndTracker), Revision: rev1, Before: 1, Devices: 1, Applied: 1,
			Reason: "0 of 1 wave-0 devices ran model/detector@sha256:1f16bbbbbbbb…+model/tracker@sha256:ffffffffffff… healthy for 10m0s (minApplied 1)"}, v,
			"soaked from the report of F, not of A")
		h.clock.add(time.Hour)
		v = h.verdictOn(detectorAndTracker, rev1, th)
		assert.Equal(t, BrakesVerdict{Release: string(detectorAndTracker), Revision: rev1, Before: 1, Devices: 1, Applied: 1, Soaked: 1, Go: true}, v)

		h.report(canary, h.agentDoc("cam-0", 0, rev1, model120, rev1, model120, fleetAt(digest120, digestF)))
		v = h.verdictOn(detectorAndTracker, rev1, th)
		assert.False(t, v.Go)
		assert.Equal(t, 0, v.Applied, "the canary no longer runs the detector at A")
		assert.Equal(t, 1, v.Devices)
	})
}

// A commit changes the canary (a file of its own: commit:2222…) and only
// moves the detector's digest on a later device (model/detector@A): the
// canary runs A from its report of the commit.
func TestVerdictCountsADigestTheCanaryTookWithACommit(t *testing.T) {
	th := api.Thresholds{MaxFailed: intp(0), MinApplied: 1, Soak: 10 * time.Minute}
	commit2 := api.RevisionRelease(rev2)
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		canary, later := h.token("cam-0"), h.token("cam-1")
		h.report(canary, h.agentDoc("cam-0", 0, rev1, commit1, rev1, commit1, detector("1.0.0", digest100)))
		h.report(later, h.agentDoc("cam-1", 1, rev1, commit1, rev1, commit1, detector("1.0.0", digest100)))
		h.clock.add(time.Minute)
		h.report(canary, h.agentDoc("cam-0", 0, rev2, commit2, rev2, commit2, detector("1.1.0", digest110)))
		held := h.agentDoc("cam-1", 1, rev1, commit1, rev2, model110, detector("1.1.0", digest110))
		held.Held, held.Result = "held: brakes: …", api.ResultHeld
		h.report(later, held)

		h.clock.add(10 * time.Minute)
		v := h.verdictOn(model110, rev2, th)
		assert.Equal(t, BrakesVerdict{Release: string(model110), Revision: rev2, Before: 1, Devices: 1, Applied: 1, Soaked: 1, Go: true}, v)
	})
}

// The canary rolls back model/detector@A, taken with model/tracker@F as
// one release (A+F). A later device whose target declares only the
// detector asks about model/detector@A: the canary's failure of A stops
// it, whatever key the canary failed it under.
func TestVerdictStopsADigestRolledBackInAKeyOfSeveral(t *testing.T) {
	stores(t, func(t *testing.T, dbURL string) {
		h := newTestHub(t, dbURL)
		canary, later := h.token("cam-0"), h.token("cam-1")
		h.report(canary, h.agentDoc("cam-0", 0, rev1, commit1, rev1, commit1, detector("1.0.0", digest100)))
		h.clock.add(time.Minute)
		staging := h.agentDoc("cam-0", 0, rev1, commit1, rev1, detectorAndTracker, fleetAt(digest110, digestF))
		staging.Staging = &api.Staging{Revision: rev1}
		h.report(canary, staging)
		h.clock.add(time.Minute)
		failed := h.agentDoc("cam-0", 0, rev1, commit1, rev1, commit1, detector("1.0.0", digest100))
		failed.Quarantined = []api.Quarantined{
			{Release: string(model110), Revision: rev1, Tag: "1.1.0", Reason: "service/infer did not become healthy"},
			{Release: string(trackerF), Revision: rev1, Tag: "2.0.0", Reason: "service/infer did not become healthy"},
		}
		h.report(canary, failed)
		held := h.agentDoc("cam-1", 1, rev1, commit1, rev1, model110, detector("1.1.0", digest110)[:1])
		held.Held, held.Result = "held: brakes: …", api.ResultHeld
		h.report(later, held)

		v := h.verdictOn(model110, rev1, api.Thresholds{MaxFailed: intp(0)})
		assert.Equal(t, BrakesVerdict{Release: string(model110), Revision: rev1, Before: 1, Devices: 1, Failed: 1, Tripped: true,
			Reason: "1 of 1 wave-0 devices failed model/detector@sha256:1f16bbbbbbbb… (maxFailed 0)"}, v)
		assert.Equal(t, map[string]string{"cam-0": StateFailed}, h.parts(detectorAndTracker), "recorded under the key it was taken as")
	})
}
