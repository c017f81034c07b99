package planner

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A held model is left out with every action of what uses it; the rest of
// the plan is not.
func TestPlanHoldsAHeldModelAndWhatUsesIt(t *testing.T) {
	m := model("REF:v9", "sha256:ab → REF:v9, not resolved")
	m.Held = "registry unreachable for REF:v9: 503"
	svc := Resource{ID: "service/infer", Kind: KindService, Fields: []Field{{"spec", "s2"}}, Deps: []string{"model/detector"}}
	other := Resource{ID: "service/other", Kind: KindService, Fields: []Field{{"spec", "o2"}}}
	a := file("/etc/infer/a.yaml", "sha256:a2", "0644")
	obs := Observed{Resources: map[string]State{
		m.ID:     present(model("sha256:ab", "")),
		svc.ID:   {Exists: true, Fields: []Field{{"spec", "s1"}}},
		other.ID: {Exists: true, Fields: []Field{{"spec", "o1"}}},
		a.ID:     present(file("/etc/infer/a.yaml", "sha256:aa", "0644")),
	}}
	cs, err := Plan(Desired{Resources: []Resource{m, a, svc, other}}, obs, Options{})
	require.NoError(t, err)
	held := map[string]string{}
	for _, a := range cs.Actions {
		held[a.Resource] = a.Held
	}
	require.Equal(t, map[string]string{
		"model/detector":        "registry unreachable for REF:v9: 503",
		"file/etc/infer/a.yaml": "",
		"service/infer":         "uses model/detector (held)",
		"service/other":         "",
	}, held)
	require.Len(t, cs.Skipped(), 2)
	require.EqualError(t, cs.Skip(), "left out of the apply: model/detector (held: registry unreachable for REF:v9: 503); service/infer (held: uses model/detector (held))")
}

// What the driver will refuse to replace makes the action fail in the
// plan, unless a delete in the same plan frees its path.
func TestPlanMarksWhatWillFail(t *testing.T) {
	a := file("/etc/infer/x", "sha256:aa", "0644")
	dir := State{Exists: true, Fields: []Field{{"content", ValueDirectory}, {"mode", "0755"}}, Blocked: "remove the directory"}
	svc := Resource{ID: "service/infer", Kind: KindService, Fields: []Field{{"spec", "s1"}}, Deps: []string{a.ID}}
	cs, err := Plan(Desired{Resources: []Resource{a, svc}}, Observed{Resources: map[string]State{a.ID: dir}}, Options{})
	require.NoError(t, err)
	require.Equal(t, "remove the directory", cs.Actions[0].Error)
	require.Equal(t, "uses file/etc/infer/x (will fail)", cs.Actions[1].Held)

	freed := Observed{
		Resources: map[string]State{a.ID: dir, "file/etc/infer/x/y": present(file("/etc/infer/x/y", "sha256:bb", "0644"))},
		Applied:   map[string][]Field{"file/etc/infer/x/y": nil},
		Created:   map[string]bool{"file/etc/infer/x/y": true},
	}
	cs, err = Plan(Desired{Resources: []Resource{a}}, freed, Options{})
	require.NoError(t, err)
	require.Empty(t, cs.Skipped(), "the delete of x/y frees x")
}

// JSON keeps "<" and ">" as they are: reasons name "<directory>".
func TestWriteJSONDoesNotEscapeHTML(t *testing.T) {
	cs := &Changeset{Actions: []Action{{Type: Update, Resource: "file/etc/x", Reason: "declared: a directory is in the way on node",
		Changes: []Change{{Field: "content", From: ValueDirectory, To: "sha256:aa"}}}}}
	var b strings.Builder
	require.NoError(t, WriteJSON(&b, cs))
	require.Contains(t, b.String(), `"from": "<directory>"`)
	require.Equal(t, "1 action", Count(1, "action"))
	require.Equal(t, "2 actions", Count(2, "action"))
}
