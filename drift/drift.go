package drift

import (
	"time"

	"github.com/tend-dev/tend/planner"
)

// Event is one drifted resource seen by one reconcile.
type Event struct {
	Time     time.Time `json:"time"`
	Resource string    `json:"resource"`
	Kind     string    `json:"kind"`
	Reason   string    `json:"reason"`
	Revision string    `json:"revision"`
}

// Detect returns an event for every action of cs that reverts drift.
func Detect(cs *planner.Changeset, now time.Time) []Event {
	var out []Event
	for _, a := range cs.Drifted() {
		out = append(out, Event{
			Time:     now,
			Resource: a.Resource,
			Kind:     a.Kind.String(),
			Reason:   string(a.Drift),
			Revision: cs.Revision,
		})
	}
	return out
}
