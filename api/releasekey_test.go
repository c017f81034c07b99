package api

import (
	"slices"
	"strings"
	"testing"
)

var (
	d1 = "sha256:" + strings.Repeat("1", 64)
	d2 = "sha256:" + strings.Repeat("2", 64)
)

func TestDigestReleaseSortsAndJoins(t *testing.T) {
	k := DigestRelease([]string{"service/web@" + d2, "model/a@" + d1, "model/a@" + d1})
	if want := ReleaseKey("model/a@" + d1 + "+service/web@" + d2); k != want {
		t.Fatalf("key %q, want %q", k, want)
	}
	if got := k.Parts(); !slices.Equal(got, []string{"model/a@" + d1, "service/web@" + d2}) {
		t.Errorf("parts %q", got)
	}
	if _, ok := k.Commit(); ok {
		t.Error("a digest's key is not a commit's")
	}
	if _, err := ParseReleaseKey(k.String()); err != nil {
		t.Errorf("its own key does not parse: %v", err)
	}
}

func TestRevisionRelease(t *testing.T) {
	for rev, want := range map[string]ReleaseKey{
		"main@sha1:ABCdef0123": "commit:abcdef0123",
		"sha1:abcd":            "commit:abcd",
		"model/a@" + d1:        ReleaseKey("model/a@" + d1),
	} {
		if got := RevisionRelease(rev); got != want {
			t.Errorf("RevisionRelease(%q) = %q, want %q", rev, got, want)
		}
	}
	if h, ok := CommitRelease("AB12").Commit(); !ok || h != "ab12" {
		t.Errorf("commit %q %v", h, ok)
	}
	if p := CommitRelease("ab12").Parts(); !slices.Equal(p, []string{"ab12"}) {
		t.Errorf("a commit's parts are its quarantine key, its hash: %q", p)
	}
}

func TestParseReleaseKeyRefuses(t *testing.T) {
	for name, s := range map[string]string{
		"empty":             "",
		"commit not hex":    "commit:xyz",
		"no digest":         "model/a",
		"short digest":      "model/a@sha256:12",
		"other kind":        "file/a@" + d1,
		"unsorted":          "service/b@" + d1 + "+model/a@" + d1,
		"repeated":          "model/a@" + d1 + "+model/a@" + d1,
		"a revision":        "main@sha1:abcd",
		"too long":          strings.Repeat("model/a@"+d1+"+", 100),
		"space in name":     "model/a b@" + d1,
		"upper-case digest": "model/a@sha256:" + strings.Repeat("A", 64),
	} {
		t.Run(name, func(t *testing.T) {
			if k, err := ParseReleaseKey(s); err == nil {
				t.Fatalf("%q parsed as %q", s, k)
			} else if !strings.Contains(err.Error(), "use commit:HASH") {
				t.Errorf("the error does not say what a key looks like: %v", err)
			}
		})
	}
}
