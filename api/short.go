package api

import "strings"

// How both sides name a release in what they print: the hub in a
// verdict's reason and its pages, tend fleet in its tables.

// Short is k with each commit hash and digest abbreviated to 12 hex
// digits, marked "…": "model/detector@sha256:1f16a2b3c4d5…".
func (k ReleaseKey) Short() string {
	parts := strings.Split(string(k), partSep)
	for i, p := range parts {
		parts[i] = shortName(p)
	}
	return strings.Join(parts, partSep)
}

// ShortRevision abbreviates ref@sha1:COMMIT to ref@sha1: and 12 hex
// digits, unmarked (a table's column).
func ShortRevision(rev string) string { return shortHash(rev, "", "@sha1:") }

// ReleaseName is how a message names release key seen at revision rev:
// the revision for a commit's release (its ref says more than its key),
// else the key, each abbreviated: "main@sha1:ab12…",
// "model/detector@sha256:1f16…".
func ReleaseName(key ReleaseKey, rev string) string {
	if _, commit := key.Commit(); commit && rev != "" && RevisionRelease(rev) == key {
		return shortName(rev)
	}
	return key.Short()
}

// shortName abbreviates the hash of a revision (REF@sha1:HASH), a commit
// key (commit:HASH) or a digest's part (ID@sha256:HEX) to 12 hex digits,
// marked "…".
func shortName(s string) string { return shortHash(s, "…", "@sha1:", "@sha256:", commitPrefix) }

// shortHash abbreviates the hash after the first of seps (in their
// order) that s holds followed by more than 12 hex digits to 12, marked
// with mark; s without one is returned as it is.
func shortHash(s, mark string, seps ...string) string {
	for _, sep := range seps {
		if i := strings.Index(s, sep); i >= 0 && len(s) > i+len(sep)+12 {
			return s[:i+len(sep)+12] + mark
		}
	}
	return s
}
