package gitsource

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

var (
	// ErrRefNotFound means the configured branch, tag or commit does not
	// exist in the remote. Retrying will not help until someone pushes it.
	ErrRefNotFound = errors.New("ref not found")

	// ErrPathNotFound means the device's folder does not exist at the
	// resolved commit, or holds no *.yaml or *.yml file.
	ErrPathNotFound = errors.New("path not found")

	// ErrUnverified means source.verify is set and the target commit does not
	// carry one OpenPGP signature by a key in the key ring: it is unsigned,
	// signed by another key, signed in a format tend does not verify, or its
	// signature does not match. Retrying will not help until a commit signed by
	// a trusted key is pushed. A key ring that cannot be read is not this
	// error: that is the node's configuration.
	ErrUnverified = errors.New("commit not verified")

	// ErrRewind means the target commit does not descend from the commit the
	// node last applied, or that cannot be shown: the branch was force-pushed,
	// or the ref now names an older commit. Applying it would roll the node
	// back, so it is refused until source.allowRewind is set or a descendant is
	// pushed; retrying will not help.
	ErrRewind = errors.New("refusing to rewind")
)

// RedactURL strips the userinfo (user name and password or token) from a
// URL, so that it can be printed and logged. Strings that are not URLs with a
// scheme (local paths, scp-like "git@host:repo") are returned unchanged.
func RedactURL(raw string) string {
	if !strings.Contains(raw, "://") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Unparsable, but it may still carry credentials: cut them out
		// textually.
		return userinfoRE.ReplaceAllString(raw, "$1")
	}
	if u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// userinfoRE matches the "user:secret@" part of any URL in a text.
var userinfoRE = regexp.MustCompile(`(://)[^/@\s"']+@`)

// redactedError hides credentials that a transport may have put into an
// error's text, keeping the error chain for errors.Is and errors.As.
type redactedError struct {
	err    error
	secret string
}

func (e *redactedError) Error() string {
	msg := userinfoRE.ReplaceAllString(e.err.Error(), "$1")
	if len(e.secret) >= minSecretLen {
		msg = strings.ReplaceAll(msg, e.secret, "***")
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.err }

// minSecretLen keeps a very short password from being replaced in every word
// of a message; the URL pattern above still removes it from URLs.
const minSecretLen = 4

// redactErr wraps err so that its text carries no userinfo from rawURL.
func redactErr(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	var secret string
	if u, perr := url.Parse(rawURL); perr == nil && u.User != nil {
		secret, _ = u.User.Password()
	}
	return &redactedError{err: err, secret: secret}
}

// notFoundError is a message of its own that still matches one of the
// sentinels above with errors.Is.
type notFoundError struct {
	msg  string
	kind error
}

func (e *notFoundError) Error() string { return e.msg }
func (e *notFoundError) Unwrap() error { return e.kind }

func notFound(kind error, format string, args ...any) error {
	return &notFoundError{msg: fmt.Sprintf(format, args...), kind: kind}
}
