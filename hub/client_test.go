package hub

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
)

func TestFleetOutput(t *testing.T) {
	h := newTestHub(t, "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	c := &Client{URL: h.http.URL, Token: readToken}
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
	require.NoError(t, WriteDevices(&out, l))
	golden.Assert(t, "fleet-status.golden", out.Bytes())

	for _, rev := range []string{rev1, rev2} {
		rd, err := c.Release(t.Context(), rev)
		require.NoError(t, err)
		out.Reset()
		require.NoError(t, WriteRelease(&out, rd))
		golden.Assert(t, "fleet-release-"+rev[len(rev)-4:]+".golden", out.Bytes())
	}
	rd, _ := c.Release(t.Context(), rev2)
	assert.Equal(t, VerdictInProgress, ReleaseVerdict(rd))
	rd.Counts[StateFailed] = 1
	assert.Equal(t, VerdictFailed, ReleaseVerdict(rd))

	_, err = (&Client{URL: h.http.URL}).Devices(t.Context(), "")
	assert.ErrorContains(t, err, "wants its read token: give --read-token-file FILE")
	_, err = (&Client{URL: "ftp://x"}).Devices(t.Context(), "")
	assert.ErrorContains(t, err, `--hub "ftp://x" is not an http(s) URL`)
	_, err = c.Release(t.Context(), "main@sha1:0000")
	assert.ErrorContains(t, err, `answered 404: release main@sha1:0000: not found: no device reported a commit whose hash begins with 0000`)
}
