package gitsource_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/source"
)

// step is one commit of a case's history on main: its name, its author
// and committer date, and who signs it ("a", "b", or "" for unsigned).
type step struct{ name, date, signer string }

// TestFetchBoundsCommitTime signs commits with the real git and
// ssh-keygen, dated with GIT_COMMITTER_DATE, against an allowed signers
// file where key a was retired (valid-before 2026-12-01) and key b was
// not. A node applies the commits of applied (fetching main at its last
// one, unless fresh: then the node's clone is new, and its first fetch
// shallow), then target is committed on top and fetched.
func TestFetchBoundsCommitTime(t *testing.T) {
	base := step{"c0", "2026-03-01T09:00:00Z", "a"}
	atP := step{"p", "2026-12-07T12:00:00Z", "b"}
	backdated := step{"t", "2026-11-15T00:00:00Z", "a"}
	months := []step{{"c1", "2026-05-01T09:00:00Z", "a"}, {"c2", "2026-09-01T09:00:00Z", "b"}, {"c3", "2026-11-20T09:00:00Z", "a"}, {"c4", "2027-02-01T09:00:00Z", "b"}}
	const firstParent = "commit {t} of {url} is dated 2026-11-15T00:00:00Z (committer time), before its first parent {p}, dated 2026-12-07T12:00:00Z; " +
		"{signers} has signer validity windows, which hold at the committer time its author sets, so tend refuses a signed commit dated more than an hour before the history it is built on"
	cases := []struct {
		name     string
		applied  []step // the last is the node's last applied commit
		target   []step // committed on top; the last is the target
		fresh    bool   // the node's clone is new: its first fetch is shallow
		none     bool   // the node applied nothing yet
		pin      bool   // the target is named by its hash, in a clone that holds it without its parent
		allow    bool   // source.allowRewind
		plain    bool   // the signers file has no validity windows
		want     string // the commit Fetch returns; "" = refused
		contains []string
	}{
		{name: "retired key backdated on top of the applied commit", applied: []step{base, atP}, target: []step{backdated},
			contains: []string{firstParent, "git commit --amend --no-edit -S"}},
		{name: "retired key backdated, node's clone new", applied: []step{base, atP}, target: []step{backdated}, fresh: true,
			contains: []string{firstParent}},
		{name: "retired key backdated, nothing applied yet", applied: []step{base, atP}, target: []step{backdated}, fresh: true, none: true,
			contains: []string{firstParent}},
		{name: "retired key backdated, allowRewind", applied: []step{base, atP}, target: []step{backdated}, allow: true,
			contains: []string{firstParent}},
		{name: "retired key backdated, pinned by hash in a shallow clone", applied: []step{base, atP}, target: []step{backdated}, pin: true,
			contains: []string{firstParent}},
		{name: "retired key backdated on the first of two new commits", applied: []step{base}, target: []step{atP, backdated},
			contains: []string{firstParent}},
		{name: "retired key backdated behind an unsigned backdated commit", applied: []step{base, atP},
			target:   []step{{"x", "2026-11-10T00:00:00Z", ""}, backdated},
			contains: []string{"commit {t} of {url} is dated 2026-11-15T00:00:00Z (committer time), before the last applied commit {p}, dated 2026-12-07T12:00:00Z"}},
		{name: "behind an unsigned backdated commit, allowRewind", applied: []step{base, atP},
			target: []step{{"x", "2026-11-10T00:00:00Z", ""}, backdated}, allow: true, want: "t"},
		{name: "signers without validity windows", applied: []step{base, atP}, target: []step{backdated}, plain: true, want: "t"},
		{name: "within the hour of skew", applied: []step{base, atP}, target: []step{{"s", "2026-12-07T11:00:00Z", "b"}}, want: "s"},
		{name: "past the hour of skew", applied: []step{base, atP}, target: []step{{"s", "2026-12-07T10:59:59Z", "b"}},
			contains: []string{"commit {s} of {url} is dated 2026-12-07T10:59:59Z (committer time), before its first parent {p}"}},
		{name: "honest commits over months, fetched at once", applied: []step{base}, target: months, want: "c4"},
		{name: "honest commits over months, the last by a key before it retired", applied: []step{base}, target: months[:3], want: "c3"},
		{name: "honest commits over months, node's clone new", applied: []step{base}, target: months, fresh: true, want: "c4"},
		{name: "honest commits over months, nothing applied yet", applied: []step{base}, target: months, fresh: true, none: true, want: "c4"},
	}
	a, b := testgit.NewSSHSigner(t), testgit.NewSSHSigner(t)
	signer := map[string]*testgit.SSHSigner{"a": a, "b": b}
	windows := testgit.WriteAllowedSigners(t,
		`a@example.com namespaces="git",valid-before="20261201Z" `+a.AuthorizedKey(t),
		`b@example.com namespaces="git" `+b.AuthorizedKey(t))
	plain := testgit.WriteAllowedSigners(t, "a@example.com "+a.AuthorizedKey(t), "b@example.com "+b.AuthorizedKey(t))

	for _, tr := range repoTransports {
		t.Run(tr.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					r := testgit.NewRepo(t)
					rev := map[string]string{}
					commit := func(s step) {
						when, err := time.Parse(time.RFC3339, s.date)
						require.NoError(t, err)
						r.WriteFile("devices/cam-017/models.yaml", "kind: models\nversion: "+s.name+"\n")
						if s.signer == "" {
							rev[s.name] = r.CommitAt(s.name, when)
							return
						}
						rev[s.name] = r.CommitSignedAt(s.name, signer[s.signer], when)
					}
					for _, s := range tc.applied {
						commit(s)
					}
					url := tr.url(t, r)
					dir := t.TempDir()
					trust := gitsource.Trust{AllowedSigners: windows}
					if tc.plain {
						trust.AllowedSigners = plain
					}
					last := rev[tc.applied[len(tc.applied)-1].name]
					if !tc.fresh {
						snap, err := fetch(t, dir, gitsource.Source{URL: url, Ref: "main", Path: "devices/cam-017", Trust: trust})
						require.NoError(t, err)
						require.Equal(t, last, snap.Revision.Commit)
					}
					if tc.none {
						last = ""
					}
					for _, s := range tc.target {
						commit(s)
					}
					target := rev[tc.target[len(tc.target)-1].name]
					ref := "main"
					if tc.pin {
						// A clone made again holds the target at depth 1.
						dir = t.TempDir()
						_, err := fetch(t, dir, gitsource.Source{URL: url, Ref: "main", Path: "devices/cam-017"})
						require.NoError(t, err)
						ref = target
					}
					src := gitsource.Source{URL: url, Ref: ref, Path: "devices/cam-017", Trust: trust, LastApplied: last, AllowRewind: tc.allow}
					snap, err := fetch(t, dir, src)
					if tc.want != "" {
						require.NoError(t, err)
						require.Nil(t, snap.Stale)
						require.Equal(t, rev[tc.want], snap.Revision.Commit)
						return
					}
					if err == nil {
						require.NotNil(t, snap.Stale, "a refusal is reported")
						require.Equal(t, last, snap.Revision.Commit, "only the last applied commit is held")
						err = snap.Stale
					}
					require.ErrorIs(t, err, source.ErrUnverified)
					pairs := []string{"{url}", url, "{signers}", trust.AllowedSigners}
					for name, h := range rev {
						pairs = append(pairs, "{"+name+"}", h[:12])
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
