package planner

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/testkit/golden"
)

func file(path, digest, mode string) Resource {
	return Resource{ID: "file" + path, Kind: KindFile, Fields: []Field{{"content", digest}, {"mode", mode}}}
}

func model(digest, reason string) Resource {
	return Resource{ID: "model/detector", Kind: KindModel, Fields: []Field{{"digest", digest}}, Reason: reason}
}

func present(r Resource) State { return State{Exists: true, Fields: r.Fields} }

func TestPlan(t *testing.T) {
	a := file("/etc/infer/a.yaml", "sha256:aa", "0644")
	b := file("/etc/infer/b.yaml", "sha256:bb", "0644")
	a2 := file("/etc/infer/a.yaml", "sha256:a2", "0644")
	svc := Resource{ID: "service/infer", Kind: KindService, Fields: []Field{{"spec", "s1"}}, Deps: []string{"file/etc/infer/a.yaml"}}

	tests := []struct {
		name     string
		desired  []Resource
		observed Observed
		want     []string // Action.String() of each action, in order
		unchange int
	}{
		{
			name:    "creates what is declared and missing",
			desired: []Resource{b, a},
			want:    []string{"+ file/etc/infer/a.yaml (declared)", "+ file/etc/infer/b.yaml (declared)"},
		},
		{
			name:     "leaves matching resources alone",
			desired:  []Resource{a, b},
			observed: Observed{Resources: map[string]State{a.ID: present(a), b.ID: present(b)}, Applied: map[string][]Field{a.ID: a.Fields, b.ID: b.Fields}},
			unchange: 2,
		},
		{
			name:     "a change on the node while Git is unchanged is drift",
			desired:  []Resource{a},
			observed: Observed{Resources: map[string]State{a.ID: present(a2)}, Applied: map[string][]Field{a.ID: a.Fields}},
			want:     []string{"~ file/etc/infer/a.yaml (drift: content changed on node)"},
		},
		{
			name:     "a deletion on the node while Git is unchanged is drift",
			desired:  []Resource{a},
			observed: Observed{Applied: map[string][]Field{a.ID: a.Fields}},
			want:     []string{"+ file/etc/infer/a.yaml (drift: deleted on node)"},
		},
		{
			name:     "a resource's own reason replaces the generic one",
			desired:  []Resource{model("sha256:cd", "sha256:ab… → sha256:cd… (new tag v8.4 matches >=8.0.0 <9)")},
			observed: Observed{Resources: map[string]State{"model/detector": present(model("sha256:ab", ""))}, Applied: map[string][]Field{"model/detector": model("sha256:ab", "").Fields}},
			want:     []string{"~ model/detector (update: sha256:ab… → sha256:cd… (new tag v8.4 matches >=8.0.0 <9))"},
		},
		{
			name:     "a model's new digest restarts its dependant and is named",
			desired:  []Resource{model("sha256:cdcdcdcdcdcdcdcdcdcd", "x"), {ID: "service/infer", Kind: KindService, Fields: []Field{{"spec", "s1"}}, Deps: []string{"model/detector"}}},
			observed: Observed{Resources: map[string]State{"model/detector": present(model("sha256:abababababababababab", "")), "service/infer": {Exists: true, Fields: []Field{{"spec", "s1"}}}}, Applied: map[string][]Field{"model/detector": model("sha256:abababababababababab", "").Fields}},
			want:     []string{"~ model/detector (update: x)", "~ service/infer (restart: model/detector sha256:abababababab → sha256:cdcdcdcdcdcd)"},
		},
		{
			name:     "an update whose inputs change too restarts whole",
			desired:  []Resource{model("sha256:cd", "x"), {ID: "service/infer", Kind: KindService, Fields: []Field{{"spec", "s1"}, {"replicas", "2"}}, Deps: []string{"model/detector"}}},
			observed: Observed{Resources: map[string]State{"model/detector": present(model("sha256:ab", "")), "service/infer": {Exists: true, Fields: []Field{{"spec", "s1"}, {"replicas", "1"}}}}, Applied: map[string][]Field{"model/detector": model("sha256:ab", "").Fields, "service/infer": {{"spec", "s1"}, {"replicas", "1"}}}},
			want:     []string{"~ model/detector (update: x)", "~ service/infer (update: replicas changed in Git; restart: model/detector sha256:ab → sha256:cd)"},
		},
		{
			name:    "and names a create",
			desired: []Resource{model("sha256:cd", "r:v8 → sha256:cd")},
			want:    []string{"+ model/detector (declared: r:v8 → sha256:cd)"},
		},
		{
			name:     "an observer's note names drift",
			desired:  []Resource{model("sha256:ab", "")},
			observed: Observed{Resources: map[string]State{"model/detector": {Exists: true, Fields: []Field{{"digest", "sha256:ab (modified)"}}, Note: "model.onnx edited"}}, Applied: map[string][]Field{"model/detector": model("sha256:ab", "").Fields}},
			want:     []string{"~ model/detector (drift: model.onnx edited)"},
		},
		{
			name:     "a change in Git is an update, not drift",
			desired:  []Resource{a2},
			observed: Observed{Resources: map[string]State{a.ID: present(a)}, Applied: map[string][]Field{a.ID: a.Fields}},
			want:     []string{"~ file/etc/infer/a.yaml (update: content changed in Git)"},
		},
		{
			name:     "an edit on the node of a file Git also changes is drift too",
			desired:  []Resource{file("/etc/infer/a.yaml", "sha256:a3", "0644")},
			observed: Observed{Resources: map[string]State{a.ID: present(a2)}, Applied: map[string][]Field{a.ID: a.Fields}},
			want:     []string{"~ file/etc/infer/a.yaml (update: content changed in Git; drift: content changed on node)"},
		},
		{
			name:     "a deletion on the node of a file Git also changes is drift too",
			desired:  []Resource{a2},
			observed: Observed{Applied: map[string][]Field{a.ID: a.Fields}},
			want:     []string{"+ file/etc/infer/a.yaml (declared; drift: deleted on node)"},
		},
		{
			name:     "a mode change on the node of a file whose content Git changes names each",
			desired:  []Resource{a2},
			observed: Observed{Resources: map[string]State{a.ID: present(file("/etc/infer/a.yaml", "sha256:aa", "0600"))}, Applied: map[string][]Field{a.ID: a.Fields}},
			want:     []string{"~ file/etc/infer/a.yaml (update: content changed in Git; drift: mode changed on node)"},
		},
		{
			name:     "an unmanaged file in the way is replaced",
			desired:  []Resource{a},
			observed: Observed{Resources: map[string]State{a.ID: present(a2)}},
			want:     []string{"~ file/etc/infer/a.yaml (declared: replaces content found on node)"},
		},
		{
			name:     "managed and no longer declared is deleted",
			desired:  []Resource{a},
			observed: Observed{Resources: map[string]State{a.ID: present(a), b.ID: present(b)}, Applied: map[string][]Field{a.ID: a.Fields, b.ID: b.Fields}, Created: map[string]bool{b.ID: true}},
			want:     []string{"- file/etc/infer/b.yaml (no longer declared)"},
			unchange: 1,
		},
		{
			name:     "something tend does not manage is never deleted",
			desired:  []Resource{a},
			observed: Observed{Resources: map[string]State{a.ID: present(a), b.ID: present(b)}, Applied: map[string][]Field{a.ID: a.Fields}},
			unchange: 1,
		},
		{
			name:     "managed but not created by tend is left on the node",
			desired:  []Resource{a},
			observed: Observed{Resources: map[string]State{a.ID: present(a), b.ID: present(b)}, Applied: map[string][]Field{a.ID: a.Fields, b.ID: b.Fields}},
			unchange: 1,
		},
		{
			name:    "a file replaced by a folder of the same name is deleted first",
			desired: []Resource{file("/etc/infer/x/y", "sha256:aa", "0644"), file("/etc/infer/w", "sha256:aa", "0644")},
			observed: Observed{
				Resources: map[string]State{"file/etc/infer/x": present(file("/etc/infer/x", "sha256:bb", "0644")), "file/etc/infer/z": present(file("/etc/infer/z", "sha256:bb", "0644"))},
				Applied:   map[string][]Field{"file/etc/infer/x": nil, "file/etc/infer/z": nil},
				Created:   map[string]bool{"file/etc/infer/x": true, "file/etc/infer/z": true},
			},
			want: []string{"- file/etc/infer/x (no longer declared)", "+ file/etc/infer/w (declared)", "+ file/etc/infer/x/y (declared)", "- file/etc/infer/z (no longer declared)"},
		},
		{
			name:    "a folder replaced by a file of the same name is emptied first",
			desired: []Resource{file("/etc/infer/x", "sha256:aa", "0644")},
			observed: Observed{
				Resources: map[string]State{"file/etc/infer/x/y": present(file("/etc/infer/x/y", "sha256:bb", "0644"))},
				Applied:   map[string][]Field{"file/etc/infer/x/y": nil},
				Created:   map[string]bool{"file/etc/infer/x/y": true},
			},
			want: []string{"- file/etc/infer/x/y (no longer declared)", "+ file/etc/infer/x (declared)"},
		},
		{
			name:     "managed, undeclared and already gone needs no action",
			desired:  []Resource{a},
			observed: Observed{Resources: map[string]State{a.ID: present(a)}, Applied: map[string][]Field{a.ID: a.Fields, b.ID: b.Fields}},
			unchange: 1,
		},
		{
			name:     "a dependency's change restarts its dependant",
			desired:  []Resource{svc, a2},
			observed: Observed{Resources: map[string]State{a.ID: present(a), svc.ID: present(svc)}, Applied: map[string][]Field{a.ID: a.Fields, svc.ID: svc.Fields}},
			want:     []string{"~ file/etc/infer/a.yaml (update: content changed in Git)", "~ service/infer (restart: file/etc/infer/a.yaml changed)"},
		},
		{
			name:     "a folder where a managed file was is named as such",
			desired:  []Resource{a},
			observed: Observed{Resources: map[string]State{a.ID: {Exists: true, Fields: []Field{{"content", "<directory>"}, {"mode", "0755"}}}}, Applied: map[string][]Field{a.ID: a.Fields}},
			want:     []string{"~ file/etc/infer/a.yaml (drift: replaced by a directory on node)"},
		},
		{
			name:     "a symlink in the way of a new file is named as such",
			desired:  []Resource{a},
			observed: Observed{Resources: map[string]State{a.ID: {Exists: true, Fields: []Field{{"content", "<symlink>"}, {"mode", "0777"}}}}},
			want:     []string{"~ file/etc/infer/a.yaml (declared: a symlink is in the way on node)"},
		},
		{
			name:    "mode drift names the field",
			desired: []Resource{a},
			observed: Observed{
				Resources: map[string]State{a.ID: present(file("/etc/infer/a.yaml", "sha256:aa", "0600"))},
				Applied:   map[string][]Field{a.ID: a.Fields},
			},
			want: []string{"~ file/etc/infer/a.yaml (drift: mode changed on node)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, err := Plan(Desired{Device: "cam-017", Revision: "main@sha1:abc", Resources: tt.desired}, tt.observed, Options{})
			require.NoError(t, err)
			var got []string
			for _, a := range cs.Actions {
				got = append(got, a.String())
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.unchange, cs.Unchanged)
		})
	}
}

func TestPlanRefusesEmptyDeclaration(t *testing.T) {
	a := file("/etc/infer/a.yaml", "sha256:aa", "0644")
	obs := Observed{Resources: map[string]State{a.ID: present(a)}, Applied: map[string][]Field{a.ID: a.Fields}, Created: map[string]bool{a.ID: true}}
	_, err := Plan(Desired{Device: "cam-017", Revision: "main@sha1:abc"}, obs, Options{})
	var empty *EmptyError
	require.True(t, errors.As(err, &empty), "got %v", err)
	require.Contains(t, err.Error(), "allowEmpty: true")
	require.Contains(t, err.Error(), "cam-017")

	cs, err := Plan(Desired{Device: "cam-017", Revision: "main@sha1:abc"}, obs, Options{AllowEmpty: true})
	require.NoError(t, err)
	require.Equal(t, []string{"- file/etc/infer/a.yaml (no longer declared)"}, []string{cs.Actions[0].String()})
}

func TestPlanIsDeterministic(t *testing.T) {
	desired, observed := bigFleet(500)
	first, err := Plan(desired, observed, Options{})
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		again, err := Plan(desired, observed, Options{})
		require.NoError(t, err)
		require.Equal(t, first, again)
	}
}

func TestGolden(t *testing.T) {
	a := file("/etc/infer/config.yaml", "sha256:aa", "0644")
	b := file("/etc/infer/labels.txt", "sha256:bb", "0644")
	old := file("/etc/infer/old.yaml", "sha256:cc", "0644")
	motd := file("/etc/motd.d/tend", "sha256:dd", "0644")
	obs := Observed{
		Resources: map[string]State{b.ID: present(file("/etc/infer/labels.txt", "sha256:ee", "0644")), old.ID: present(old), motd.ID: present(motd)},
		Applied:   map[string][]Field{b.ID: b.Fields, old.ID: old.Fields, motd.ID: motd.Fields},
		Created:   map[string]bool{b.ID: true, old.ID: true, motd.ID: true},
	}
	changes, err := Plan(Desired{Device: "cam-017", Revision: "main@sha1:3f2a1c9d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39", Resources: []Resource{motd, b, a}}, obs, Options{})
	require.NoError(t, err)
	none, err := Plan(Desired{Device: "cam-017", Revision: "main@sha1:3f2a1c9d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39", Resources: []Resource{motd}}, Observed{Resources: map[string]State{motd.ID: present(motd)}}, Options{})
	require.NoError(t, err)

	for name, cs := range map[string]*Changeset{"changes": changes, "nochanges": none} {
		var text, js bytes.Buffer
		require.NoError(t, WriteText(&text, cs))
		require.NoError(t, WriteJSON(&js, cs))
		golden.Assert(t, name+".txt.golden", text.Bytes())
		golden.Assert(t, name+".json.golden", js.Bytes())
	}
}

// bigFleet returns n declared files of which a tenth changed on the node and
// a tenth are new, plus n/10 managed files no longer declared.
func bigFleet(n int) (Desired, Observed) {
	d := Desired{Device: "bench", Revision: "main@sha1:0"}
	o := Observed{Resources: make(map[string]State, n), Applied: make(map[string][]Field, n)}
	for i := 0; i < n; i++ {
		r := file(fmt.Sprintf("/etc/app/%05d.yaml", i), fmt.Sprintf("sha256:%064d", i), "0644")
		d.Resources = append(d.Resources, r)
		switch i % 10 {
		case 0: // new
		case 1:
			o.Resources[r.ID] = State{Exists: true, Fields: []Field{{"content", "sha256:x"}, {"mode", "0644"}}}
			o.Applied[r.ID] = r.Fields
		default:
			o.Resources[r.ID] = present(r)
			o.Applied[r.ID] = r.Fields
		}
	}
	o.Created = make(map[string]bool, n/10)
	for i := 0; i < n/10; i++ {
		r := file(fmt.Sprintf("/etc/old/%05d.yaml", i), "sha256:old", "0644")
		o.Resources[r.ID] = present(r)
		o.Applied[r.ID] = r.Fields
		o.Created[r.ID] = true
	}
	return d, o
}

func BenchmarkPlan(b *testing.B) {
	for _, n := range []int{10_000, 20_000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			d, o := bigFleet(n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := Plan(d, o, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A resource started before a dependency changed (an apply interrupted
// between the model's swap and the service's restart) owes a restart: the
// plan performs it, even though nothing changes in Git any more.
func TestPlanPerformsAnOwedRestart(t *testing.T) {
	svc := Resource{ID: "service/infer", Kind: KindService, Fields: []Field{{"spec", "s1"}}, Deps: []string{"model/detector"}}
	m := model("sha256:cd", "")
	obs := Observed{
		Resources: map[string]State{m.ID: present(m), svc.ID: {Exists: true, Fields: svc.Fields, Owed: []string{"model/detector"}}},
		Applied:   map[string][]Field{m.ID: m.Fields, svc.ID: svc.Fields},
	}
	cs, err := Plan(Desired{Device: "cam-017", Revision: "r", Resources: []Resource{m, svc}}, obs, Options{})
	require.NoError(t, err)
	require.Equal(t, []string{"~ service/infer (restart: model/detector changed since it started (a restart owed by an interrupted apply))"}, strs(cs))
	require.Equal(t, Restart, cs.Actions[0].Type)

	t.Run("an update restarts whole", func(t *testing.T) {
		svc2 := svc
		svc2.Fields = []Field{{"spec", "s2"}}
		cs, err := Plan(Desired{Resources: []Resource{m, svc2}}, obs, Options{})
		require.NoError(t, err)
		require.True(t, cs.Actions[0].Restart)
		require.Contains(t, cs.Actions[0].Reason, "update: spec changed in Git; restart: model/detector changed since it started")
	})
	t.Run("a restart the plan makes anyway is not doubled", func(t *testing.T) {
		m2 := model("sha256:ef", "")
		cs, err := Plan(Desired{Resources: []Resource{m2, svc}}, obs, Options{})
		require.NoError(t, err)
		require.Equal(t, []string{"~ model/detector (update: digest changed in Git)", "~ service/infer (restart: model/detector sha256:cd → sha256:ef)"}, strs(cs))
	})
}

func strs(cs *Changeset) []string {
	var out []string
	for _, a := range cs.Actions {
		out = append(out, a.String())
	}
	return out
}

// A hand edit is drift even when Git changes the same file: drift.Detect
// and status see it, and under suspend it is reported, not silently
// overwritten later.
func TestPlanEditAndGitChangeIsDrift(t *testing.T) {
	a := file("/etc/infer/a.yaml", "sha256:aa", "0644")
	obs := Observed{Resources: map[string]State{a.ID: present(file("/etc/infer/a.yaml", "sha256:ed", "0644"))}, Applied: map[string][]Field{a.ID: a.Fields}}
	cs, err := Plan(Desired{Resources: []Resource{file("/etc/infer/a.yaml", "sha256:a2", "0644")}}, obs, Options{})
	require.NoError(t, err)
	require.Len(t, cs.Drifted(), 1)
	require.Equal(t, Drift("content changed on node"), cs.Actions[0].Drift)
}
