package gitsource_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/source"
)

// history is a fleet repo with c0 ── c1 ── c2 on main and a branch side
// with s1 on c1; a node has applied main at c2, unless the case says the
// clone is fresh. Then upstream changes as the case says:
//
//	commit     c3 on top of c2 (main moves forward)
//	commits    c3 and c4 on top of c2
//	force-push main reset to c1, then c3 on it: c2 is gone from main
//	replay     main reset to c0
//	merge      main merged into side: m has parents s1 and c2
type history struct {
	repo *testgit.Repo
	rev  map[string]string
}

func newHistory(t *testing.T) *history {
	t.Helper()
	r := testgit.NewRepo(t)
	h := &history{repo: r, rev: map[string]string{}}
	for _, c := range []string{"c0", "c1", "c2"} {
		r.WriteFile("devices/cam-017/models.yaml", "kind: models\nversion: "+c+"\n")
		h.rev[c] = r.Commit(c)
	}
	r.Git("branch", "side", h.rev["c1"])
	r.Checkout("side")
	r.WriteFile("devices/cam-017/side.yaml", "kind: side\n")
	h.rev["s1"] = r.Commit("s1")
	r.Checkout("main")
	return h
}

func (h *history) change(t *testing.T, how string) {
	t.Helper()
	r := h.repo
	switch how {
	case "":
	case "commit", "commits":
		r.WriteFile("devices/cam-017/models.yaml", "kind: models\nversion: c3\n")
		h.rev["c3"] = r.Commit("c3")
		if how == "commits" {
			r.WriteFile("devices/cam-017/models.yaml", "kind: models\nversion: c4\n")
			h.rev["c4"] = r.Commit("c4")
		}
	case "force-push":
		r.ResetHard(h.rev["c1"])
		r.WriteFile("devices/cam-017/models.yaml", "kind: models\nversion: c3\n")
		h.rev["c3"] = r.Commit("c3")
	case "replay":
		r.ResetHard(h.rev["c0"])
	case "merge":
		r.Checkout("side")
		r.Git("merge", "--quiet", "--no-ff", "-m", "m", "main")
		h.rev["m"] = r.Head()
		require.Equal(t, h.rev["s1"]+" "+h.rev["c2"], r.Git("log", "-1", "--format=%P"))
		r.Checkout("main")
	default:
		t.Fatalf("unknown change %q", how)
	}
}

func TestFetchRewind(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: builds long histories; make test runs it, -short skips it")
	}
	const unknown = "0123456789abcdef0123456789abcdef01234567"
	cases := []struct {
		name     string
		fresh    bool   // the clone never fetched c2
		change   string // see history
		ref      string // "" = main
		last     string // a commit of history by name, or a literal
		allow    bool
		want     string   // commit Fetch returns, by name; "" = refused with ErrRewind
		contains []string // in the refusal; {name} is that commit's hash[:12]
	}{
		{name: "new commit on top", change: "commit", last: "c2", want: "c3"},
		{name: "last applied several commits back", change: "commits", last: "c2", want: "c4"},
		{name: "same commit", last: "c2", want: "c2"},
		{name: "nothing applied yet", last: "", want: "c2"},
		{name: "last applied on a merged branch, second parent", change: "merge", ref: "side", last: "c2", want: "m"},
		{name: "force-push", change: "force-push", last: "c2", contains: []string{
			"target {c3} of {url} does not descend from the last applied commit {c2} (a force-push or an older commit replayed)",
			"refusing to rewind; set source.allowRewind: true, or run tend apply --allow-rewind once, to accept it"}},
		{name: "force-push, allowRewind", change: "force-push", last: "c2", allow: true, want: "c3"},
		// Whether the clone still shows c2 after main moved back depends on
		// how much history the fetch keeps; refused either way.
		{name: "older commit replayed", change: "replay", last: "c2", contains: []string{
			"target {c0} of {url}", "the last applied commit {c2}", "source.allowRewind: true"}},
		{name: "older commit pinned by hash", ref: "c1", last: "c2", contains: []string{
			"target {c1} of {url} does not descend from the last applied commit {c2}"}},
		{name: "last applied unknown to the clone", last: unknown, contains: []string{
			"target {c2} of {url} cannot be shown to descend from the last applied commit " + unknown[:12] + ", even with the full history",
			"source.allowRewind: true"}},
		{name: "fresh clone after a force-push", fresh: true, change: "force-push", last: "c2", contains: []string{
			"last applied commit {c2}, even with the full history"}},
		{name: "fresh clone after a force-push, allowRewind", fresh: true, change: "force-push", last: "c2", allow: true, want: "c3"},
		{name: "last applied not a hash", last: "main", contains: []string{
			`last applied revision "main", which is not a full commit hash`, "allowRewind"}},
	}
	for _, tr := range repoTransports {
		t.Run(tr.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					h := newHistory(t)
					url := tr.url(t, h.repo)
					dir := t.TempDir()
					if !tc.fresh {
						snap, err := fetch(t, dir, gitsource.Source{URL: url, Ref: "main", Path: "devices/cam-017"})
						require.NoError(t, err)
						require.Equal(t, h.rev["c2"], snap.Revision.Commit)
					}
					h.change(t, tc.change)

					ref := tc.ref
					switch {
					case ref == "":
						ref = "main"
					case h.rev[ref] != "":
						ref = h.rev[ref]
					}
					last := tc.last
					if h.rev[last] != "" {
						last = h.rev[last]
					}
					src := gitsource.Source{URL: url, Ref: ref, Path: "devices/cam-017", LastApplied: last, AllowRewind: tc.allow}
					snap, err := fetch(t, dir, src)
					if tc.want != "" {
						require.NoError(t, err)
						require.Equal(t, h.rev[tc.want], snap.Revision.Commit)
						return
					}
					// Refused: the node is held at the last applied commit
					// when the clone has it, and the refusal is reported.
					if err == nil {
						require.NotNil(t, snap.Stale, "a refusal is reported")
						require.Equal(t, last, snap.Revision.Commit, "only the last applied commit is held")
						err = snap.Stale
					}
					require.ErrorIs(t, err, source.ErrRewind)
					pairs := []string{"{url}", url}
					for name, rev := range h.rev {
						pairs = append(pairs, "{"+name+"}", rev[:12])
					}
					repl := strings.NewReplacer(pairs...)
					for _, s := range tc.contains {
						require.Contains(t, err.Error(), repl.Replace(s))
					}
					t.Log(err)
				})
			}
		})
	}
}

// repoTransports are the ways a test fetches a repo: its local path, and
// smart HTTP through the real git http-backend.
var repoTransports = []struct {
	name string
	url  func(t *testing.T, r *testgit.Repo) string
}{
	{"local path", func(t *testing.T, r *testgit.Repo) string { return r.Dir() }},
	{"http", func(t *testing.T, r *testgit.Repo) string { return r.URL(testgit.ServeHTTP(t, filepath.Dir(r.Dir()))) }},
}
