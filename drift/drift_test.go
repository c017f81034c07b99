package drift

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tend-dev/tend/planner"
)

func TestDetect(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	cs := &planner.Changeset{Revision: "main@sha1:abc", Actions: []planner.Action{
		{Type: planner.Update, Resource: "file/etc/a", Kind: planner.KindFile, Reason: "drift: content changed on node", Drift: true},
		{Type: planner.Update, Resource: "file/etc/b", Kind: planner.KindFile, Reason: "update: content changed in Git"},
		{Type: planner.Create, Resource: "model/m", Kind: planner.KindModel, Reason: "drift: deleted on node", Drift: true},
	}}
	got := Detect(cs, now)
	require.Equal(t, []Event{
		{Time: now, Resource: "file/etc/a", Kind: "file", Reason: "content changed on node", Revision: "main@sha1:abc"},
		{Time: now, Resource: "model/m", Kind: "model", Reason: "deleted on node", Revision: "main@sha1:abc"},
	}, got)
}

func TestLogKeepsTheMostRecent(t *testing.T) {
	l := NewLog(3)
	for i := 0; i < 5; i++ {
		l.Add(Event{Resource: fmt.Sprint(i)})
	}
	var ids []string
	for _, e := range l.Recent() {
		ids = append(ids, e.Resource)
	}
	require.Equal(t, []string{"2", "3", "4"}, ids)
}
