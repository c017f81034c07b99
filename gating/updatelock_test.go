package gating

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/planner"
)

// A release stops a service when it updates it (a scale-up excepted),
// restarts it or deletes it.
func TestStoppedServices(t *testing.T) {
	svc := func(typ planner.ActionType, name string, changes ...planner.Change) planner.Action {
		return planner.Action{Type: typ, Resource: planner.ServiceID(name), Kind: planner.KindService, Reason: "declared", Changes: changes}
	}
	replicas := func(from, to string) planner.Change {
		return planner.Change{Field: planner.FieldReplicas, From: from, To: to}
	}
	drift := svc(planner.Update, "drifted")
	drift.Drift, drift.Reason = "stopped on node", "drift: stopped on node"
	got := stoppedServices([]planner.Action{
		{Type: planner.Update, Resource: "file/etc/infer/a", Kind: planner.KindFile},
		svc(planner.Create, "new"),
		svc(planner.Update, "up", replicas("1", "2")),
		svc(planner.Update, "down", replicas("2", "1")),
		svc(planner.Update, "spec", planner.Change{Field: planner.FieldSpec, From: "sha256:a", To: "sha256:b"}),
		svc(planner.Restart, "restarted"),
		svc(planner.Delete, "gone"),
		svc(planner.Restart, "restarted"),
		drift,
	})
	require.Equal(t, []string{"down", "spec", "restarted", "gone"}, got)
}
