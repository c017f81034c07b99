package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/diff"
)

// tend diff shows content diffs with --diff, and by default in a
// pull-request comment unless --diff=false.
func TestDiffContentDiffs(t *testing.T) {
	r := exampleFleet(t)
	tests := []struct {
		name  string
		flags []string
		shown bool
	}{
		{"text leaves diffs out", []string{"--format", "text"}, false},
		{"text with --diff", []string{"--format", "text", "--diff"}, true},
		{"json with --diff", []string{"--format", "json", "--diff"}, true},
		{"markdown by default", []string{"--format", "markdown"}, true},
		{"markdown with --diff=false", []string{"--format", "markdown", "--diff=false"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"diff", "--base", "HEAD~1", "--head", "HEAD"}, tt.flags...)
			out, errOut, code := tend(t, append(args, ciFlags(t, r.Dir())...)...)
			require.Equal(t, 2, code, errOut)
			if tt.flags[1] == "json" {
				out = jsonDiffs(t, out)
			}
			if tt.shown {
				require.Contains(t, out, "-threshold: 0.4\n")
				require.Contains(t, out, "+threshold: 0.5\n")
			} else {
				require.NotContains(t, out, "threshold")
			}
		})
	}
}

// jsonDiffs returns the diffs of every action of a JSON diff, one after
// the other.
func jsonDiffs(t *testing.T, out string) string {
	t.Helper()
	var d diff.JSONDiff
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	var b strings.Builder
	for _, dev := range d.Devices {
		if dev.Plan == nil {
			continue
		}
		for _, a := range dev.Plan.Actions {
			b.WriteString(a.Diff)
		}
	}
	return b.String()
}
