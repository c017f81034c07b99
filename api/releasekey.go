package api

import (
	"fmt"
	"slices"
	"strings"
)

// ReleaseKey names a release by what made it new on a device:
//
//   - "commit:HASH" when the commit changed what the device runs;
//   - otherwise the digests a tag or semver policy newly resolved,
//     "model/NAME@sha256:HEX" or "service/NAME@sha256:HEX", several
//     joined, sorted, with "+".
//
// Two devices that take the same new digest share its key whatever else
// they run, so a model retrained and pushed as a tag meets a rollout's
// brakes as a commit does. The parts are the keys of a device's release
// quarantine; a commit's part there is its bare hash.
type ReleaseKey string

// Limits of a release key read from a report or a query.
const (
	MaxReleaseKeyBytes = 4096
	MaxReleaseParts    = 64
)

const (
	commitPrefix = "commit:"
	partSep      = "+"
)

// CommitRelease is the key of a release that a commit made: commit:HASH,
// the hash in lower case.
func CommitRelease(hash string) ReleaseKey {
	return ReleaseKey(commitPrefix + strings.ToLower(hash))
}

// DigestRelease is the key of a release that the digests parts made new
// (each "model/NAME@sha256:HEX" or "service/NAME@sha256:HEX"): sorted,
// without repeats, joined with "+".
func DigestRelease(parts []string) ReleaseKey {
	p := slices.Clone(parts)
	slices.Sort(p)
	return ReleaseKey(strings.Join(slices.Compact(p), partSep))
}

// RevisionRelease is the key of the release a revision (REF@sha1:HASH)
// makes when nothing else says what made it new: the commit's. It is
// how a report of a tend that sends no key (v0.1.0) is counted. A
// revision without "@sha1:" is returned as it is.
func RevisionRelease(revision string) ReleaseKey {
	if _, hash, ok := strings.Cut(revision, "@sha1:"); ok {
		return CommitRelease(hash)
	}
	if h, ok := strings.CutPrefix(revision, "sha1:"); ok {
		return CommitRelease(h)
	}
	return ReleaseKey(revision)
}

// String is the key as it is written.
func (k ReleaseKey) String() string { return string(k) }

// Commit is the hash of a commit's key.
func (k ReleaseKey) Commit() (string, bool) {
	return strings.CutPrefix(string(k), commitPrefix)
}

// Parts are the quarantine keys the release is made of: the commit's
// hash, or each digest's "ID@sha256:HEX".
func (k ReleaseKey) Parts() []string {
	if h, ok := k.Commit(); ok {
		return []string{h}
	}
	if k == "" {
		return nil
	}
	return strings.Split(string(k), partSep)
}

// ParseReleaseKey checks s, as a report or a query sends it, and returns
// it as a key. Its errors say what a key looks like.
func ParseReleaseKey(s string) (ReleaseKey, error) {
	const want = "use commit:HASH, or model/NAME@sha256:HEX (service/NAME@sha256:HEX), several joined with +"
	if len(s) > MaxReleaseKeyBytes {
		return "", fmt.Errorf("release key of %d bytes, more than %d: %s", len(s), MaxReleaseKeyBytes, want)
	}
	if h, ok := strings.CutPrefix(s, commitPrefix); ok {
		if !isHex(h) || len(h) < 4 || len(h) > 64 {
			return "", fmt.Errorf("release key %q: the commit is not a hash: %s", s, want)
		}
		return ReleaseKey(s), nil
	}
	parts := strings.Split(s, partSep)
	if len(parts) > MaxReleaseParts {
		return "", fmt.Errorf("release key of %d parts, more than %d: %s", len(parts), MaxReleaseParts, want)
	}
	for i, p := range parts {
		id, digest, ok := strings.Cut(p, "@")
		hex, isSHA := strings.CutPrefix(digest, "sha256:")
		kind, name, _ := strings.Cut(id, "/")
		if !ok || !isSHA || len(hex) != 64 || !isHex(hex) || (kind != "model" && kind != "service") || name == "" || strings.ContainsAny(name, " \t\n@+") {
			return "", fmt.Errorf("release key %q: part %q is not a digest's key: %s", s, p, want)
		}
		if i > 0 && parts[i-1] >= p {
			return "", fmt.Errorf("release key %q: its parts are not sorted and distinct: %s", s, want)
		}
	}
	return ReleaseKey(s), nil
}

func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}
