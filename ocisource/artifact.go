package ocisource

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tend-dev/tend/source"
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

// AnnotationAncestors is tend's own annotation of a fleet artifact: the
// commits before the published one, nearest first, as full hashes
// separated by commas (at most MaxAncestors): each commit of its
// first-parent chain with its other parents. A device takes a target
// whose list holds the commit it applied as a descendant, whatever the
// committers' clocks said; an artifact without it (flux push artifact)
// is judged by AnnotationCreated alone.
const AnnotationAncestors = "dev.tend.ancestors"

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

	// ErrRedirectLoop means the registry answered a request with more than
	// MaxRedirects redirects: a loop, most likely, in the registry or a
	// proxy in front of it.
	ErrRedirectLoop = errors.New("too many redirects")
)

// parseRevision reads the revision annotation of a fleet artifact (see
// source.ParseRevision); one that names no commit is ErrNotFleet.
func parseRevision(s string) (source.Revision, error) {
	rev, err := source.ParseRevision(s)
	if err != nil {
		return rev, fmt.Errorf("%w: %w; push it with tend publish, or with flux push artifact --revision=REF@sha1:COMMIT", ErrNotFleet, err)
	}
	return rev, nil
}
