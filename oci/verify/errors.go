package verify

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnsigned is the cause of every verification failure: the artifact
// carries no signature that satisfies a requirement. Retrying does not
// help until someone signs the digest (or the verify block changes).
var ErrUnsigned = errors.New("signature requirement not met")

// Error says which artifact (its id, e.g. model/detector, its repository
// and digest) failed which requirement, what tend found instead, and what
// to do.
type Error struct {
	ID          string // the resource, e.g. model/detector; may be empty
	Repository  string // e.g. registry.local:5000/models/detector
	Digest      string // sha256:…
	Requirement string // e.g. "cosign signature by /etc/tend/cosign.pub"
	Found       string // e.g. "found 1 signature by another key"
	Fix         string // what to do
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.ID != "" {
		b.WriteString(e.ID + " ")
	}
	fmt.Fprintf(&b, "%s@%s: no %s", e.Repository, e.Digest, e.Requirement)
	if e.Found != "" {
		fmt.Fprintf(&b, " (%s)", e.Found)
	}
	if e.Fix != "" {
		b.WriteString("; " + e.Fix)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return ErrUnsigned }

// ActiveWarning is the warning for a version a node runs (a model's
// active version, a service's image) that err, its verification under
// the requirements asked for now, found unsigned: verify changed since
// it was applied (a key was removed). It keeps running, and the next new
// version must verify. ActiveWarning is nil when err is nil or no *Error
// (the signatures could not be looked up: nothing is known of them).
func ActiveWarning(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return nil
	}
	var b strings.Builder
	if e.ID != "" {
		b.WriteString(e.ID + " ")
	}
	fmt.Fprintf(&b, "runs %s@%s, which no longer verifies: no %s", e.Repository, e.Digest, e.Requirement)
	if e.Found != "" {
		fmt.Fprintf(&b, " (%s)", e.Found)
	}
	b.WriteString("; it keeps running, and a new version must verify")
	return errors.New(b.String())
}

// short abbreviates a digest for a message: sha256:ab12cd34ef56….
func short(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	return d
}
