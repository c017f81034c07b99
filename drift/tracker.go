package drift

import (
	"slices"
	"sync"
	"time"
)

// Record is one drift event and when tend reverted it.
type Record struct {
	Event
	Reverted string `json:"reverted,omitempty"` // RFC 3339 with nanoseconds; "" until reverted
}

// Tracker follows drift from tick to tick and keeps the most recent
// events, oldest first. It is safe for concurrent use.
type Tracker struct {
	mu      sync.Mutex
	size    int
	open    map[string]string // resource → reason of the drift seen and not yet gone
	history []Record
}

// NewTracker returns a tracker that keeps the last size events.
func NewTracker(size int) *Tracker {
	return &Tracker{size: size, open: map[string]string{}}
}

// Observe moves the drift on by one tick that planned. seen is the drift
// its plan saw; reverted reports whether the tick applied a resource's
// revert (and did not roll it back); end is when the tick ended.
//
// It returns the events new this tick: drift not open before, or open with
// another reason. Drift still open is not new, whatever number of ticks
// sees it. Drift closes when a tick reverts it or no longer sees it; its
// record then says when.
func (t *Tracker) Observe(seen []Event, reverted func(id string) bool, end time.Time) []Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	var fresh []Event
	now := make(map[string]string, len(seen))
	for _, e := range seen {
		if reason, ok := t.open[e.Resource]; !ok || reason != e.Reason {
			fresh = append(fresh, e)
		}
		now[e.Resource] = e.Reason
	}
	closed := map[string]bool{}
	for id := range t.open {
		if _, still := now[id]; !still {
			closed[id] = true
			delete(t.open, id)
		}
	}
	for id, reason := range now {
		if reverted(id) {
			closed[id] = true
			delete(t.open, id)
		} else {
			t.open[id] = reason
		}
	}
	for _, e := range fresh {
		t.history = append(t.history, Record{Event: e})
	}
	for i := range t.history {
		if r := &t.history[i]; r.Reverted == "" && closed[r.Resource] {
			// To the nanosecond, as the event's time: a revert never
			// reads as earlier than the drift.
			r.Reverted = end.UTC().Format(time.RFC3339Nano)
		}
	}
	if over := len(t.history) - t.size; over > 0 {
		t.history = slices.Clone(t.history[over:])
	}
	return fresh
}

// Recent returns a copy of the kept records, oldest first.
func (t *Tracker) Recent() []Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append(make([]Record, 0, len(t.history)), t.history...)
}

// Open reports whether drift of resource id is open: seen and not yet
// reverted or gone.
func (t *Tracker) Open(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.open[id]
	return ok
}
