package service

import (
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/backoff"
)

// Record is what the external tests read of an instance's record.
type Record struct {
	Replica  int
	PID      int
	Alive    bool // the runtime sees its process running
	Command  []string
	Restarts int
	Crashes  int
	LastExit string
	Limits   string
}

// Records returns the instance records of the service called name, by
// replica.
func (s *Supervisor) Records(name string) ([]Record, error) {
	recs, err := s.serviceRecords(name)
	out := make([]Record, 0, len(recs))
	for _, r := range recs {
		var command []string
		if d, ok := r.Instance.Spec.(Describable); ok {
			command = d.Describe().Command
		}
		out = append(out, Record{Replica: r.Instance.Replica, PID: pidOf(r.Proc), Alive: r.Proc != nil && r.Proc.Alive(),
			Command: command, Restarts: r.Restarts, Crashes: r.Crashes, LastExit: r.LastExit, Limits: warningOf(r.Proc)})
	}
	return out, err
}

// RecordedPIDs returns the pid of every recorded instance, of every
// service.
func (s *Supervisor) RecordedPIDs() ([]int, error) {
	recs, err := s.records()
	pids := make([]int, 0, len(recs))
	for _, r := range recs {
		pids = append(pids, pidOf(r.Proc))
	}
	return pids, err
}

// RestartDelay is the wait before the restart that follows the n-th quick
// exit in a row.
func RestartDelay(n int) time.Duration { return restartBackoff.Delay(n) }

// SetRestartBackoff makes b the restart backoff until the test ends. Call
// it before making the test's supervisors, so that it is put back after
// their watchers ended.
func SetRestartBackoff(t testing.TB, b backoff.Exponential) {
	old := restartBackoff
	restartBackoff = b
	t.Cleanup(func() { restartBackoff = old })
}

// SetHook makes hook hear where s is: "lock:busy" (a replica's lock is
// held by another process: s waits for it), "exited:owned",
// "exited:gave-up", "exited:adopted", "exited:restarted".
func (s *Supervisor) SetHook(hook func(point string)) { s.hook.Store(&hook) }

// SetStartupGrace makes d the startup grace of services without a health
// probe until the test ends.
func SetStartupGrace(t testing.TB, d time.Duration) {
	old := startupGrace
	startupGrace = d
	t.Cleanup(func() { startupGrace = old })
}

// SetClock makes now the supervisor's clock: when instances started and
// exited, as the backoff counts them. Call it before Start.
func (s *Supervisor) SetClock(now func() time.Time) { s.now = now }
