package diff_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/diff"
	"github.com/tend-dev/tend/internal/testkit/golden"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/planner"
)

// diffFleet has one device whose config, sensitive key, model ref and
// service (replicas, env, command) change between base and head.
func diffFleet(t *testing.T, config, key, tag, level, replicas, flag string) string {
	t.Helper()
	return `apiVersion: tend.dev/v1alpha1
kind: Device
metadata: {name: cam-001}
spec:
  models:
    - {name: detector, ref: "registry.local:5000/models/detector:` + tag + `"}
  files:
    - path: /etc/infer/config.yaml
      content: "` + config + `"
    - path: /etc/infer/key.pem
      content: "` + key + `"
      sensitive: true
  services:
    - name: infer
      command: ["/opt/infer/server", "` + flag + `"]
      env: {LOG_LEVEL: ` + level + `}
      replicas: ` + replicas + `
`
}

var commits = regexp.MustCompile(`[0-9a-f]{40}`)

func TestRunWithDiff(t *testing.T) {
	r := testgit.NewRepo(t)
	r.WriteFile("devices/cam-001/device.yaml", diffFleet(t, `threshold: 0.4\nclasses: 80\n`, `hunter2\n`, "v8", "info", "2", "--fast"))
	base := r.Commit("base")
	r.WriteFile("devices/cam-001/device.yaml", diffFleet(t, `threshold: 0.5\nclasses: 80\n`, `correct horse\n`, "v9", "debug", "1", "--slow"))
	head := r.Commit("head")

	run := func(t *testing.T, withDiff bool) *diff.Result {
		res, err := diff.Run(context.Background(), open(t, r), base, head, diff.Options{Path: "devices/{device}", Diff: withDiff})
		require.NoError(t, err)
		require.Len(t, res.Devices, 1)
		return res
	}
	t.Run("text and markdown show each update's diff", func(t *testing.T) {
		res := run(t, true)
		res.Base, res.Head = diff.Revision{Name: "main"}, diff.Revision{Name: "change"}
		var txt, md, js bytes.Buffer
		require.NoError(t, diff.WriteText(&txt, res))
		require.NoError(t, diff.WriteMarkdown(&md, res, diff.MarkdownOptions{}))
		require.NoError(t, diff.WriteJSON(&js, res))
		for _, out := range []string{txt.String(), md.String(), js.String()} {
			require.NotContains(t, out, "hunter2")
			require.NotContains(t, out, "horse")
			require.Contains(t, out, planner.SensitiveHidden)
		}
		golden.Assert(t, "diff.txt.golden", commits.ReplaceAll(txt.Bytes(), []byte("<commit>")))
		golden.Assert(t, "diff.md.golden", commits.ReplaceAll(md.Bytes(), []byte("<commit>")))
	})
	t.Run("an unresolved model's ref is in its reason alone", func(t *testing.T) {
		a := run(t, true).Devices[0].Plan.Actions[0]
		require.Equal(t, "model/detector", a.Resource)
		require.Empty(t, a.Diff)
	})
	t.Run("without Diff no action carries one", func(t *testing.T) {
		for _, a := range run(t, false).Devices[0].Plan.Actions {
			require.Empty(t, a.Diff, a.Resource)
		}
	})
	t.Run("a comment with no room for the diffs keeps the plan", func(t *testing.T) {
		res := run(t, true)
		var full, small bytes.Buffer
		require.NoError(t, diff.WriteMarkdown(&full, res, diff.MarkdownOptions{}))
		// WriteMarkdown keeps 400 bytes for its note: this limit has room for
		// the plan, not for its diffs.
		require.NoError(t, diff.WriteMarkdown(&small, res, diff.MarkdownOptions{Limit: full.Len() + 300}))
		require.NotContains(t, small.String(), "```diff")
		require.Contains(t, small.String(), "update: content changed in Git")
		require.Contains(t, small.String(), "content diffs are left out")
		require.Less(t, small.Len(), full.Len())
		require.True(t, strings.HasPrefix(small.String(), diff.CommentMarker))
	})
}
