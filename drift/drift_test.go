package drift

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/planner"
)

func TestDetect(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	cs := &planner.Changeset{Revision: "main@sha1:abc", Actions: []planner.Action{
		{Type: planner.Update, Resource: "file/etc/a", Kind: planner.KindFile, Reason: "drift: content changed on node", Drift: "content changed on node"},
		{Type: planner.Update, Resource: "file/etc/b", Kind: planner.KindFile, Reason: "update: content changed in Git"},
		{Type: planner.Create, Resource: "model/m", Kind: planner.KindModel, Reason: "drift: deleted on node", Drift: "deleted on node"},
	}}
	got := Detect(cs, now)
	require.Equal(t, []Event{
		{Time: now, Resource: "file/etc/a", Kind: "file", Reason: "content changed on node", Revision: "main@sha1:abc"},
		{Time: now, Resource: "model/m", Kind: "model", Reason: "deleted on node", Revision: "main@sha1:abc"},
	}, got)
}

func ev(id, reason string) Event { return Event{Resource: id, Kind: "file", Reason: reason} }

func none(string) bool { return false }

func all(string) bool { return true }

func TestTrackerOpensAndCloses(t *testing.T) {
	tr := NewTracker(10)
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

	// Seen while suspended: one event, open.
	require.Equal(t, []Event{ev("a", "content changed on node")}, tr.Observe([]Event{ev("a", "content changed on node")}, none, t0))
	require.Empty(t, tr.Observe([]Event{ev("a", "content changed on node")}, none, t0.Add(time.Minute)), "still open: not new")
	require.True(t, tr.Open("a"))
	require.Empty(t, tr.Recent()[0].Reverted)

	// Changed again in another way: a new event.
	require.Len(t, tr.Observe([]Event{ev("a", "mode changed on node")}, none, t0.Add(2*time.Minute)), 1)

	// Reverted: both records close at the tick's end.
	end := t0.Add(3 * time.Minute)
	require.Empty(t, tr.Observe([]Event{ev("a", "mode changed on node")}, all, end))
	require.False(t, tr.Open("a"))
	for _, r := range tr.Recent() {
		require.Equal(t, end.Format(time.RFC3339Nano), r.Reverted)
	}

	// Gone by itself (changed back by hand): closed without a revert.
	tr.Observe([]Event{ev("b", "deleted on node")}, none, end)
	tr.Observe(nil, none, end.Add(time.Minute))
	require.False(t, tr.Open("b"))
	require.NotEmpty(t, tr.Recent()[2].Reverted)
}

func TestTrackerKeepsTheMostRecent(t *testing.T) {
	tr := NewTracker(3)
	for i := range 5 {
		tr.Observe([]Event{ev(fmt.Sprint(i), "x")}, all, time.Now())
	}
	var ids []string
	for _, r := range tr.Recent() {
		ids = append(ids, r.Resource)
	}
	require.Equal(t, []string{"2", "3", "4"}, ids)
	rs := tr.Recent()
	rs[0].Reverted = "mangled"
	require.NotEqual(t, "mangled", tr.Recent()[0].Reverted, "Recent returns a copy")
}

func TestTrackerConcurrentUse(t *testing.T) {
	tr := NewTracker(1000)
	var wg sync.WaitGroup
	fresh := make([]int, 4)
	for i := range 4 {
		wg.Go(func() {
			id := fmt.Sprint(i)
			for j := range 50 {
				// Each goroutine's resource drifts, stays open for one
				// tick, then is reverted: 25 events each.
				revert := func(string) bool { return j%2 == 1 }
				fresh[i] += len(tr.Observe([]Event{ev(id, "x")}, revert, time.Now()))
				_ = tr.Recent()
			}
		})
	}
	wg.Wait()
	// Other goroutines' ticks do not see a resource, so they close it:
	// under concurrency the count is not fixed, but every event seen is
	// kept once and never lost.
	total := 0
	for _, n := range fresh {
		total += n
	}
	require.Equal(t, total, len(tr.Recent()))
	require.GreaterOrEqual(t, total, 4*25)
}
