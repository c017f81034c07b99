package ocisource

import (
	"errors"
	"fmt"
	"strings"
)

// Flux's artifact format: the config and layer media types, and the
// annotations of the manifest.
const (
	ConfigMediaType    = "application/vnd.cncf.flux.config.v1+json"
	ContentMediaType   = "application/vnd.cncf.flux.content.v1.tar+gzip"
	AnnotationSource   = "org.opencontainers.image.source"
	AnnotationRevision = "org.opencontainers.image.revision"
	AnnotationCreated  = "org.opencontainers.image.created"
)

// Scheme starts the source.url of a fleet published as an artifact.
const Scheme = "oci://"

// IsURL reports whether a source URL names a published artifact.
func IsURL(u string) bool { return strings.HasPrefix(u, Scheme) }

// Sentinel errors.
var (
	// ErrNotFleet means the artifact is not a fleet artifact: another
	// media type, another number of layers, or no commit in its revision.
	// Retrying will not help until a fleet artifact is pushed to the tag.
	ErrNotFleet = errors.New("not a fleet artifact")
)

// Revision formats the revision annotation: REF@sha1:COMMIT, as Flux
// names a Git revision.
func Revision(ref, commit string) string { return ref + "@sha1:" + commit }

// ParseRevision reads a revision annotation: REF@sha1:COMMIT (tend
// publish, and flux push artifact as Flux documents it), sha1:COMMIT (no
// ref), or REF/COMMIT and a bare COMMIT (older Flux). COMMIT is a full
// SHA-1 hash, returned in lower case; ref may be "".
func ParseRevision(s string) (ref, commit string, err error) {
	switch {
	case strings.Contains(s, "@sha1:"):
		ref, commit, _ = strings.Cut(s, "@sha1:")
	case strings.HasPrefix(s, "sha1:"):
		commit = strings.TrimPrefix(s, "sha1:")
	case strings.Contains(s, "/"):
		i := strings.LastIndexByte(s, '/')
		ref, commit = s[:i], s[i+1:]
	default:
		commit = s
	}
	commit = strings.ToLower(commit)
	if !isHash(commit) {
		return "", "", fmt.Errorf("%w: revision %q names no Git commit: push it with tend publish, or with flux push artifact --revision=REF@sha1:COMMIT", ErrNotFleet, s)
	}
	return ref, commit, nil
}

func isHash(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
