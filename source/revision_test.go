package source_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/source"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

func TestParseRevision(t *testing.T) {
	tests := []struct {
		name, in string
		want     source.Revision
		format   string // what String writes back
	}{
		{"ref and commit", "main@sha1:" + commit, source.Revision{Ref: "main", Commit: commit}, "main@sha1:" + commit},
		{"a ref with slashes", "refs/heads/devices/cam-017@sha1:" + commit, source.Revision{Ref: "refs/heads/devices/cam-017", Commit: commit}, "refs/heads/devices/cam-017@sha1:" + commit},
		{"HEAD stays HEAD", "HEAD@sha1:" + commit, source.Revision{Ref: "HEAD", Commit: commit}, "HEAD@sha1:" + commit},
		{"no ref: shown as HEAD", "sha1:" + commit, source.Revision{Commit: commit}, "HEAD@sha1:" + commit},
		{"older Flux: REF/COMMIT", "main/" + commit, source.Revision{Ref: "main", Commit: commit}, "main@sha1:" + commit},
		{"a bare commit", commit, source.Revision{Commit: commit}, "HEAD@sha1:" + commit},
		{"upper case commit is lowered", "main@sha1:" + strings.ToUpper(commit), source.Revision{Ref: "main", Commit: commit}, "main@sha1:" + commit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := source.ParseRevision(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.format, got.String())
			again, err := source.ParseRevision(got.String())
			require.NoError(t, err)
			require.True(t, again.SameCommit(got) && again.SameRef(got), "round trip of %s gave %+v", got, again)
		})
	}
}

func TestParseRevisionRefuses(t *testing.T) {
	for _, in := range []string{
		"", "main", "v1.2.3", "main@sha1:", "main@sha1:0123456", "main@sha1:" + commit + "0",
		"main@sha1:" + strings.Replace(commit, "0", "g", 1), "main@sha256:" + commit, "rev1",
	} {
		t.Run(in, func(t *testing.T) {
			rev, err := source.ParseRevision(in)
			require.Error(t, err)
			require.True(t, rev.IsZero(), "a refused revision names nothing: %+v", rev)
			require.Contains(t, err.Error(), `revision "`+in+`" names no Git commit`, "the error quotes the input")
		})
	}
}

func TestRevisionCompare(t *testing.T) {
	main := source.Revision{Ref: "main", Commit: commit}
	other := "fedcba9876543210fedcba9876543210fedcba98"
	require.True(t, main.SameCommit(source.Revision{Ref: "devices/cam-017", Commit: commit}), "the commit alone counts")
	require.False(t, main.SameCommit(source.Revision{Ref: "main", Commit: other}))
	require.False(t, source.Revision{}.SameCommit(source.Revision{}), "nothing is not the same commit as nothing")
	require.True(t, main.SameRef(source.Revision{Ref: "refs/heads/main"}))
	require.True(t, source.Revision{}.SameRef(source.Revision{Ref: "HEAD"}), `"" is the remote's HEAD`)
	require.False(t, main.SameRef(source.Revision{Ref: "devices/cam-017"}))
	require.True(t, source.Revision{}.IsZero())
	require.False(t, main.IsZero())
	require.Equal(t, "0123456789ab", main.Short())
}

func TestSnapshotString(t *testing.T) {
	cases := []struct {
		name string
		snap source.Snapshot
		want string
	}{
		{"branch", source.Snapshot{URL: "https://host/fleet.git", Revision: source.Revision{Ref: "main", Commit: "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"}}, "https://host/fleet.git@main (1a2b3c4d5e6f)"},
		{"remote HEAD", source.Snapshot{URL: "/srv/fleet", Revision: source.Revision{Commit: "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"}}, "/srv/fleet@HEAD (1a2b3c4d5e6f)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.snap.String())
		})
	}
}

// A revision comes from a server or an artifact's annotation: a ref no Git
// ref can be (too long, control characters, a terminal escape, a newline
// that would fake a line of plan output) is refused, and the error quotes
// at most 64 bytes of it.
func TestParseRevisionRefusesHostileRefs(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"2 MB ref", strings.Repeat("r", 2<<20) + "@sha1:" + commit, "names no Git ref: its ref is 2097152 bytes, more than 255"},
		{"newline", "main\nPlan: 0 to add@sha1:" + commit, `names no Git ref: its ref holds '\n', which no Git ref may`},
		{"terminal escape", "main\x1b[2J@sha1:" + commit, `names no Git ref: its ref holds '\x1b', which no Git ref may`},
		{"climb", "refs/../main@sha1:" + commit, `its ref holds "..", which no Git ref may`},
		{"C1 control sequence introducer", "main\u009b2J@sha1:" + commit, "its ref holds U+009B, a control or format character"},
		{"right-to-left override", "main\u202enialp@sha1:" + commit, "its ref holds U+202E, a control or format character"},
		{"not UTF-8", "main\x9b2J@sha1:" + commit, "its ref holds bytes that are not UTF-8"},
		{"2 MB commit", strings.Repeat("0", 2<<20), "… (2097152 bytes) names no Git commit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := source.ParseRevision(tt.in)
			require.ErrorContains(t, err, tt.want)
			require.Less(t, len(err.Error()), 300, "the error does not repeat the input")
		})
	}
	_, err := source.ParseRevision("refs/heads/release-1.2_x@sha1:" + commit)
	require.NoError(t, err, "an ordinary ref")
	_, err = source.ParseRevision("refs/heads/größe-1@sha1:" + commit)
	require.NoError(t, err, "a ref of letters beyond ASCII")
}
