package e2e

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/hub"
	"github.com/tend-dev/tend/internal/testkit/golden"
)

// tend fleet release against a hub that heard of a model pushed as a tag
// (rolled back on the canary), of a commit in progress and of one every
// device applied: its exit code, and on exit 1 who rolled back what and
// why.
func TestFleetReleaseExitCodes(t *testing.T) {
	t.Parallel()
	store, err := hub.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "hub.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	srv, err := hub.NewServer(store, hub.Options{PublicRead: true})
	require.NoError(t, err)
	web := httptest.NewServer(srv)
	t.Cleanup(web.Close)

	const (
		rev1 = "main@sha1:1111111111111111111111111111111111111111"
		rev2 = "main@sha1:2222222222222222222222222222222222222222"
	)
	bad := "model/detector@sha256:1f16" + strings.Repeat("b", 60)
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	report := func(device string, wave int, applied, target, key string, edit func(*status.Status)) {
		t.Helper()
		s := status.Status{FormatVersion: status.FormatVersion, Device: device, AppliedRevision: applied, TargetRevision: target,
			LastReconcile: at.Format(time.RFC3339Nano), Wave: &wave, AppliedRelease: "commit:" + applied[len("main@sha1:"):],
			Release: &status.Release{Key: key, Revision: target, Resources: []status.ReleaseResource{
				{ID: "model/detector", Ref: "registry.example/detector", Tag: "1.1.0", Digest: bad[len("model/detector@"):]}}}}
		if edit != nil {
			edit(&s)
		}
		_, err := store.Ingest(t.Context(), &s, at)
		require.NoError(t, err)
		at = at.Add(time.Second)
	}
	report("cam-1", 0, rev1, rev1, bad, nil)
	report("cam-2", 1, rev1, rev1, bad, func(s *status.Status) { s.Held = "held: brakes: …" })
	report("cam-1", 0, rev1, rev1, "commit:"+rev1[len("main@sha1:"):], func(s *status.Status) {
		s.Quarantined = []status.Quarantined{{Release: bad, Revision: rev1, Tag: "1.1.0", Reason: "service/infer did not become healthy: health probe failed 3 times", At: "2026-12-03T12:00:02Z"}}
	})
	report("cam-3", 0, rev1, rev2, "commit:"+rev2[len("main@sha1:"):], nil)

	for _, c := range []struct {
		name, release string
		code          int
		stdout        string // a golden file, or what stderr says
		stderr        string
	}{
		{"rolled back", "model/detector@1.1.0", 1, "fleet-release-failed.golden", ""},
		{"in progress", "2222", 2, "fleet-release-progress.golden", ""},
		{"applied", "main@sha1:1111111", 0, "fleet-release-applied.golden", ""},
		{"unknown", "model/detector@9.9.9", 1, "", "answered 404: release model/detector@9.9.9: not found: no device reported resolving model/detector@9.9.9 to a digest"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := tend(t, "fleet", "release", c.release, "--hub", web.URL)
			require.Equal(t, c.code, code, "%s%s", out, errOut)
			if c.stdout != "" {
				golden.Assert(t, c.stdout, []byte(out))
			}
			require.Contains(t, errOut, c.stderr)
		})
	}
}
