package agent

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gating"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// A gate that hangs, or whose port is closed, costs one bounded wait: the
// ticks that follow within the back-off hold the release with the same
// reason without asking it, and revert drift as every tick does; once the
// back-off has passed, the gate is asked again and its 200 lets the
// release through.
func TestGateDownCostsOneWait(t *testing.T) {
	for _, tt := range []struct {
		name  string
		hangs bool // else the port is closed
		stall bool // it sends its status line, then nothing
	}{
		{"hangs", true, false},
		{"stalls after its status line", true, true},
		{"closed port", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			quiet := &quietServer{next: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), got: make(chan struct{}, 16), stall: tt.stall}
			addr, reopen := serveQuiet(t, quiet, tt.hangs)
			repo := testgit.NewRepo(t)
			repo.WriteFile("devices/cam-017/rollout.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: default}\nspec:\n  selector: {}\n"+
				"  gate: {url: \"http://"+addr+"/ok?revision={revision}\"}\n")
			repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v1"))
			repo.Commit("v1")
			c := newConfig(t, repo.Dir())
			h := heldLoopOf(c)
			clock := &hubClock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
			h.r.Now = clock.now
			h.scheduled()
			require.NoError(t, h.err)
			require.Equal(t, "v1", h.file(t), "a device that applied nothing takes its first commit at once")

			repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v2"))
			v2 := repo.Commit("v2")
			downReason := "held: gate did not answer: http://" + addr + "/ok?revision=" + v2
			driftRevertedWhileHeld := func() {
				t.Helper()
				require.NoError(t, os.WriteFile(filepath.Join(c.Root, "etc/infer/a"), []byte("edited by hand"), 0o644))
				h.scheduled()
				require.NoError(t, h.err)
				require.NotNil(t, h.res.Held)
				require.Equal(t, downReason, h.res.Held.Reason)
				require.Equal(t, "v1", h.file(t), "drift is reverted while the gate holds")
				require.Equal(t, 1.0, heldMetrics(t, h)["gate"])
			}

			// The first question waits for the gate, and gets no answer.
			h.r.gating.GateTimeout = 250 * time.Millisecond
			driftRevertedWhileHeld()
			if tt.hangs {
				<-quiet.got
			}
			asked := quiet.asked.Load()

			// The gate is back, but the ticks within the back-off do not
			// ask it: they hold at once, with the same reason.
			quiet.up.Store(true)
			reopen()
			h.r.gating.GateTimeout = 0 // from now on the gate answers
			driftRevertedWhileHeld()
			clock.add(gating.ServerDownBackoff.Delay(1) - time.Nanosecond)
			driftRevertedWhileHeld()
			require.Equal(t, asked, quiet.asked.Load(), "the gate was not asked within the back-off")

			// Once the back-off has passed, the gate is asked, and its 200
			// lets the release through.
			clock.add(time.Nanosecond)
			h.scheduled()
			require.NoError(t, h.err)
			<-quiet.got
			require.Equal(t, asked+1, quiet.asked.Load())
			require.Nil(t, h.res.Held)
			require.Equal(t, "v2", h.file(t))
			require.Equal(t, 0.0, heldMetrics(t, h)["gate"])
		})
	}
}
