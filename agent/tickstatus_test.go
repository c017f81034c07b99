package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/applier"
)

// The status document lists what was rolled back here: a commit is its
// own revision; a digest names the fleet revision it was rolled back at.
func TestStatusTickQuarantine(t *testing.T) {
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	commit := "main@sha1:" + "ab12"
	res := &Result{Quarantine: []applier.Quarantined{
		{Revision: commit, Reason: "service/infer did not become healthy: x", At: at},
		{Revision: "service/web@sha256:cd34", Tag: "latest", Applied: commit, Reason: "y", At: at.Add(time.Minute)},
	}}
	require.Equal(t, []status.Quarantined{
		{Release: commit, Revision: commit, Reason: "service/infer did not become healthy: x", At: "2026-12-03T09:00:00Z"},
		{Release: "service/web@sha256:cd34", Revision: commit, Tag: "latest", Reason: "y", At: "2026-12-03T09:01:00Z"},
	}, statusTick(res).Quarantined)
	require.Nil(t, statusTick(&Result{}).Quarantined, "a tick that did not read them keeps the last list")
	require.NotNil(t, statusTick(&Result{Quarantine: []applier.Quarantined{}}).Quarantined, "none is an empty list, which clears it")
}
