package drift

import (
	"strings"
	"sync"
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
			Reason:   strings.TrimPrefix(a.Reason, "drift: "),
			Revision: cs.Revision,
		})
	}
	return out
}

// Log keeps the most recent events, oldest first. It is safe for concurrent
// use.
type Log struct {
	mu     sync.Mutex
	size   int
	events []Event
}

// NewLog returns a log that keeps the last size events.
func NewLog(size int) *Log { return &Log{size: size} }

// Add records events, dropping the oldest past the log's size.
func (l *Log) Add(events ...Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, events...)
	if over := len(l.events) - l.size; over > 0 {
		l.events = append([]Event(nil), l.events[over:]...)
	}
}

// Recent returns a copy of the recorded events, oldest first.
func (l *Log) Recent() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}
