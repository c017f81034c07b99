package applier

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

const (
	verdictBefore = "1111111111111111111111111111111111111111"
	verdictAfter  = "2222222222222222222222222222222222222222"
)

func verdictApplier(t *testing.T, at time.Time) *Applier {
	t.Helper()
	a, err := New(Config{Root: t.TempDir(), StateDir: t.TempDir(), Now: func() time.Time { return at }})
	require.NoError(t, err)
	return a
}

// The record is written before each runner of the release starts, keyed
// as its quarantine would be, in the state format, and removed once the
// run is over; a plan that makes nothing new records nothing.
func TestVerdictRecord(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	inv := &Inventory{Revision: "main@sha1:" + verdictBefore, Resources: map[string]InventoryEntry{}}
	d := &render.Desired{Desired: planner.Desired{Revision: "main@sha1:" + verdictAfter}, Specs: map[string]any{
		"service/web": render.Service{Hash: "h-web"}, "service/api": render.Service{Hash: "h-api"}}}
	web := planner.Action{Resource: "service/web", Kind: planner.KindService, Type: planner.Update}
	api := planner.Action{Resource: "service/api", Kind: planner.KindService, Type: planner.Update}

	t.Run("written before each runner, removed when done", func(t *testing.T) {
		a := verdictApplier(t, at)
		var w awaiting
		require.NoError(t, w.before(a, inv, d, web, []string{"service/web"}))
		a.now = func() time.Time { return at.Add(time.Minute) }
		require.NoError(t, w.before(a, inv, d, api, []string{"service/web", "service/api"}))
		v, err := LoadVerdict(a.stateDir)
		require.NoError(t, err)
		require.Equal(t, &Verdict{
			Revision: d.Revision, Previous: inv.Revision,
			Keys:     []VerdictKey{{Key: verdictAfter, Revision: d.Revision}},
			Services: []VerdictService{{ID: "service/web", Spec: "h-web"}, {ID: "service/api", Spec: "h-api"}},
			Since:    at,
		}, v)
		b, err := os.ReadFile(statedir.Dir(a.stateDir).Verdict())
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(b), "{\n  \"formatVersion\": \"2\","), "%s", b)

		w.done(context.Background(), a)
		v, err = LoadVerdict(a.stateDir)
		require.NoError(t, err)
		require.Nil(t, v)
	})
	t.Run("nothing new, nothing recorded", func(t *testing.T) {
		a := verdictApplier(t, at)
		same := &render.Desired{Desired: planner.Desired{Revision: inv.Revision}, Specs: d.Specs}
		var w awaiting
		require.NoError(t, w.before(a, inv, same, web, []string{"service/web"}))
		require.NoFileExists(t, statedir.Dir(a.stateDir).Verdict())
		w.done(context.Background(), a)
	})
}

// ResumeVerdict with no record does nothing; a release already
// quarantined (killed during its rollback) is not waited for; a runner no
// driver can judge is taken as healthy. Each clears the record.
func TestResumeVerdictWithoutAWait(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v := Verdict{Revision: "main@sha1:" + verdictAfter, Previous: "main@sha1:" + verdictBefore,
		Keys:     []VerdictKey{{Key: verdictAfter, Revision: "main@sha1:" + verdictAfter}},
		Services: []VerdictService{{ID: "service/web", Spec: "h"}}, Since: at}
	a := verdictApplier(t, at)
	require.NoError(t, a.ResumeVerdict(context.Background()), "no record")

	require.NoError(t, statedir.WriteJSON(a.stateDir, statedir.VerdictFile, v, 0o644))
	require.NoError(t, a.ResumeVerdict(context.Background()), "no driver judges service/web")
	require.NoFileExists(t, statedir.Dir(a.stateDir).Verdict())
	q, err := LoadQuarantine(a.stateDir)
	require.NoError(t, err)
	require.Empty(t, q)

	require.NoError(t, Quarantine(a.stateDir, verdictAfter, Quarantined{Revision: v.Revision, Reason: "unhealthy", At: at}))
	require.NoError(t, statedir.WriteJSON(a.stateDir, statedir.VerdictFile, v, 0o644))
	require.NoError(t, a.ResumeVerdict(context.Background()), "quarantined already")
	require.NoFileExists(t, statedir.Dir(a.stateDir).Verdict())
}
