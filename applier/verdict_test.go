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
	d := &render.Desired{Desired: planner.Desired{Revision: "main@sha1:" + verdictAfter, Resources: []planner.Resource{
		{ID: "service/web", Kind: planner.KindService, Fields: []planner.Field{{Name: planner.FieldSpec, Value: "h-web"}}},
		{ID: "service/api", Kind: planner.KindService, Fields: []planner.Field{{Name: planner.FieldSpec, Value: "h-api"}}},
	}}, Specs: map[string]any{
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

// slowVerifier judges a service by waiting until its context ends.
type slowVerifier struct{ waits int }

func (slowVerifier) Kind() planner.Kind { return planner.KindService }
func (slowVerifier) Observe(context.Context, string, any) (planner.State, error) {
	return planner.State{}, nil
}
func (slowVerifier) Apply(context.Context, planner.Action, any) error { return nil }
func (v *slowVerifier) Verify(ctx context.Context, _, _ string) error {
	v.waits++
	<-ctx.Done()
	return ctx.Err()
}

// A wait the tick's timeout (and the shutdown grace after it) cuts short
// is a verdict: the release is quarantined and the record removed, so no
// later tick waits for it again. A wait cut short by a shutdown is judged
// again next time. A record that does not read is forgotten, not waited
// on by every tick.
func TestResumeVerdictCutShort(t *testing.T) {
	defer func(g time.Duration) { ShutdownGrace = g }(ShutdownGrace)
	ShutdownGrace = 0
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v := Verdict{Revision: "main@sha1:" + verdictAfter, Previous: "main@sha1:" + verdictBefore,
		Keys:     []VerdictKey{{Key: verdictAfter, Revision: "main@sha1:" + verdictAfter}},
		Services: []VerdictService{{ID: "service/web", Spec: "h"}}, Since: at}
	vf := &slowVerifier{}
	a, err := New(Config{Root: t.TempDir(), StateDir: t.TempDir(), Now: func() time.Time { return at }}, vf)
	require.NoError(t, err)
	require.NoError(t, statedir.WriteJSON(a.stateDir, statedir.VerdictFile, v, 0o644))

	shutdown, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, a.ResumeVerdict(shutdown), context.Canceled)
	require.FileExists(t, statedir.Dir(a.stateDir).Verdict(), "a shutdown keeps the record")

	tick, cancel := context.WithDeadline(context.Background(), time.Now())
	defer cancel()
	err = a.ResumeVerdict(tick)
	var ve *VerdictError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "service/web", ve.Failed)
	require.NoFileExists(t, statedir.Dir(a.stateDir).Verdict())
	q, err := LoadQuarantine(a.stateDir)
	require.NoError(t, err)
	require.Contains(t, q, verdictAfter)
	require.Equal(t, 2, vf.waits)

	require.NoError(t, os.WriteFile(statedir.Dir(a.stateDir).Verdict(), []byte(`{"revision":`), 0o644))
	require.NoError(t, a.ResumeVerdict(context.Background()))
	require.NoFileExists(t, statedir.Dir(a.stateDir).Verdict(), "a record that does not read is forgotten")
	require.Equal(t, 2, vf.waits)
}
