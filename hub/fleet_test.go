package hub

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/hubclient"
	"github.com/tend-dev/tend/internal/testkit/golden"
)

func TestFleetOutput(t *testing.T) {
	h := newTestHub(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	c := &hubclient.Client{URL: h.http.URL, Token: readToken}
	for i, name := range []string{"cam-1", "cam-2", "cam-3"} {
		s := h.doc(name, rev1, "")
		switch i {
		case 1:
			s.TargetRevision, s.Held = rev2, "held: rollout wave 1 opens 2026-12-03T13:00:00Z"
		case 2:
			s.TargetRevision, s.LastError = rev2, "rolled back:\nservice/web did not become healthy"
			s.Labels["evil"] = "a\tb"
		}
		h.report(h.token(name), s)
	}
	s := h.doc("cam-1", rev2, "")
	h.report(h.token("cam-1"), s)

	l, err := c.Devices(t.Context(), "site=lyon")
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, hubclient.WriteDevices(&out, l))
	golden.Assert(t, "fleet-status.golden", out.Bytes())

	for _, rev := range []string{rev1, rev2} {
		rd, err := c.Release(t.Context(), rev)
		require.NoError(t, err)
		out.Reset()
		require.NoError(t, hubclient.WriteRelease(&out, rd))
		golden.Assert(t, "fleet-release-"+rev[len(rev)-4:]+".golden", out.Bytes())
	}
	rd, _ := c.Release(t.Context(), rev2)
	assert.Equal(t, hubclient.VerdictInProgress, hubclient.ReleaseVerdict(rd))
	rd.Counts[StateFailed] = 1
	assert.Equal(t, hubclient.VerdictFailed, hubclient.ReleaseVerdict(rd))

	_, err = (&hubclient.Client{URL: h.http.URL}).Devices(t.Context(), "")
	assert.ErrorContains(t, err, "wants its read token: give --read-token-file FILE")
	_, err = (&hubclient.Client{URL: "ftp://x"}).Devices(t.Context(), "")
	assert.ErrorContains(t, err, `--hub "ftp://x" is not an http(s) URL`)
	_, err = c.Release(t.Context(), "main@sha1:0000")
	assert.ErrorContains(t, err, `answered 404: release main@sha1:0000: not found: no device reported a commit whose hash begins with 0000`)
}

// tend fleet release of a model pushed as a tag: found by its tag, and,
// rolled back on the canary, it says who rolled back what and why.
func TestFleetReleaseOfATag(t *testing.T) {
	h := newTestHub(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	c := &hubclient.Client{URL: h.http.URL, Token: readToken}
	canary, late := h.token("cam-1"), h.token("cam-2")
	h.report(canary, h.agentDoc("cam-1", 0, rev1, commit1, rev1, model110, detector("1.1.0", digest110)))
	held := h.agentDoc("cam-2", 1, rev1, commit1, rev1, model110, detector("1.1.0", digest110))
	held.Held = "held: brakes: 0 of 1 wave-0 devices ran model/detector@sha256:1f16bbbbbbbb… healthy for 20s (minApplied 1)"
	h.report(late, held)
	h.report(h.token("cam-3"), h.agentDoc("cam-3", 1, rev1, commit1, rev1, commit1, detector("1.0.0", digest100)))

	var out bytes.Buffer
	rd, err := c.Release(t.Context(), "model/detector@1.1.0")
	require.NoError(t, err)
	require.NoError(t, hubclient.WriteRelease(&out, rd))
	golden.Assert(t, "fleet-release-tag-progress.golden", out.Bytes())
	assert.Equal(t, hubclient.VerdictInProgress, hubclient.ReleaseVerdict(rd))

	h.clock.add(30 * time.Second)
	s := h.agentDoc("cam-1", 0, rev1, commit1, rev1, commit1, detector("1.0.0", digest100))
	s.Quarantined = []api.Quarantined{{Release: string(model110), Revision: rev1, Tag: "1.1.0",
		Reason: "service/infer did not become healthy: health probe failed 3 times in 20s: exit status 1", At: "2026-12-03T12:00:30Z"}}
	h.report(canary, s)
	rd, err = c.Release(t.Context(), "model/detector@sha256:1f16")
	require.NoError(t, err)
	out.Reset()
	require.NoError(t, hubclient.WriteRelease(&out, rd))
	golden.Assert(t, "fleet-release-tag-failed.golden", out.Bytes())
	assert.Equal(t, hubclient.VerdictFailed, hubclient.ReleaseVerdict(rd))

	l, err := c.Devices(t.Context(), "")
	require.NoError(t, err)
	out.Reset()
	require.NoError(t, hubclient.WriteDevices(&out, l))
	golden.Assert(t, "fleet-status-keys.golden", out.Bytes())
}
