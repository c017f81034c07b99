package agent

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/manifest"
)

// A hub's answer is server text: a device of wave 1 holds a release on a
// verdict that contradicts itself, and prints what the hub wrote (its
// reason, the first line of an error) escaped and cut, never raw into a
// plan, a log line or the status.
func TestBrakesHubAnswers(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tt := range []struct {
		name   string
		status int
		body   string
		held   string // "" when the release goes on
	}{
		{"go", 200, `{"go": true}`, ""},
		{"go and tripped", 200, `{"go": true, "tripped": true, "reason": "1 of 1 failed"}`,
			"held: brakes: the hub's verdict is contradictory (go and tripped): HUB"},
		{"a reason with escapes and newlines", 200, `{"go": false, "reason": "2 of 5 failed\u001b[31m\nFORGED: all good\u202e"}`,
			`held: brakes: 2 of 5 failed\x1b[31m\nFORGED: all good\u202e`},
		{"a long reason", 200, `{"go": false, "tripped": true, "reason": "` + long + `"}`,
			"held: brakes: " + long[:200] + "… (300 bytes)"},
		{"an error with escapes", 403, "no\x1b[2J entry\r\nsecond line", `held: brakes: hub HUB answered 403: no\x1b[2J entry\r`},
		{"wait without a reason", 200, `{"go": false}`, "held: brakes: the hub says wait"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			defer hub.Close()
			repo := testgit.NewRepo(t)
			repo.WriteFile("devices/cam-017/rollout.yaml", fmt.Sprintf(quietRollout, hub.URL, manifest.OnHubDownHold))
			repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v1"))
			repo.Commit("v1")
			h := newHeldLoop(t, repo)
			h.scheduled()
			require.NoError(t, h.err)
			require.Equal(t, "v1", h.file(t), "a device that applied nothing takes its first commit at once")

			repo.WriteFile("devices/cam-017/d.yaml", fmt.Sprintf(oneFile, "v2"))
			repo.Commit("v2")
			h.scheduled()
			require.NoError(t, h.err)
			if tt.held == "" {
				require.Nil(t, h.res.Held)
				require.Equal(t, "v2", h.file(t))
				return
			}
			want := strings.ReplaceAll(tt.held, "HUB", hub.URL)
			require.NotNil(t, h.res.Held)
			require.Equal(t, want, h.res.Held.Reason)
			require.Equal(t, want, h.tracker.Status().Held)
			require.Equal(t, "v1", h.file(t))
		})
	}
}
