package api

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Revisions, commit keys and digests are shown to 12 hex digits: a
// release key's parts marked "…", a revision in the device table not.
func TestShortHashes(t *testing.T) {
	commit := "0123456789abcdef0123456789abcdef01234567"
	digest := "sha256:1f16a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f"
	for _, tc := range []struct{ name, got, want string }{
		{"a revision", ShortRevision("main@sha1:" + commit), "main@sha1:0123456789ab"},
		{"a revision already short", ShortRevision("main@sha1:0123"), "main@sha1:0123"},
		{"not a revision", ShortRevision("commit:" + commit), "commit:" + commit},
		{"a revision's name", shortName("main@sha1:" + commit), "main@sha1:0123456789ab…"},
		{"a commit key", shortName("commit:" + commit), "commit:0123456789ab…"},
		{"a release key", ReleaseKey("model/detector@" + digest + "+service/web@" + digest).Short(),
			"model/detector@sha256:1f16a2b3c4d5…+service/web@sha256:1f16a2b3c4d5…"},
		{"a name without a hash", shortName("model/detector"), "model/detector"},
		{"a commit's release by its revision", ReleaseName(CommitRelease(commit), "main@sha1:"+commit), "main@sha1:0123456789ab…"},
		{"a commit's release seen at another commit", ReleaseName(CommitRelease(commit), "main@sha1:4567"), "commit:0123456789ab…"},
		{"a release of digests", ReleaseName(ReleaseKey("model/detector@"+digest), "main@sha1:"+commit), "model/detector@sha256:1f16a2b3c4d5…"},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, tc.got) })
	}
}
