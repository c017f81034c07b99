package service_test

import (
	"log/slog"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/manifest"
)

// stops lists what the supervisor logged of stopping service name's
// replicas: the message, and the exit when it said one.
func (l *supervisorLog) stops(name string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		var resource, exit string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "resource":
				resource = a.Value.String()
			case "exit":
				exit = " (" + a.Value.String() + ")"
			}
			return true
		})
		if resource == "service/"+name && (r.Message == "service stopped" || r.Message == "service was not running; its record is removed") {
			out = append(out, r.Message+exit)
		}
	}
	return out
}

// Removing a service whose process is already gone says so: nothing was
// stopped.
func TestHaltOfADeadServiceIsNotAStop(t *testing.T) {
	t.Run("exited as its policy allows, seen by the agent", func(t *testing.T) {
		n := newNode(t, true, testAllow)
		n.AllowEmpty = true
		never := n.service("never", 1, "-exit", "1")
		never.Restart = manifest.RestartNever
		n.apply(never, n.service("up", 1))
		eventually(t, func() bool { return n.instances("never")[0].LastExit != "" }, "the exit was not recorded")
		n.apply()
		require.Equal(t, []string{"service was not running; its record is removed (exit code 1)"}, n.log.stops("never"))
		require.Equal(t, []string{"service stopped"}, n.log.stops("up"))
	})
	t.Run("killed while no agent watched", func(t *testing.T) {
		n := newNode(t, false, testAllow)
		n.AllowEmpty = true
		n.apply(n.service("killed", 1))
		pid := n.pids("killed")[0]
		require.NoError(t, syscall.Kill(-pid, syscall.SIGKILL))
		eventually(t, func() bool { return len(n.pids("killed")) == 0 }, "the killed process still runs")
		n.apply()
		require.Equal(t, []string{"service was not running; its record is removed"}, n.log.stops("killed"))
	})
}
