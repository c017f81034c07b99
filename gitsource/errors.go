package gitsource

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/tend-dev/tend/internal/errkind"
)

var (
	// ErrRefNotFound means the configured branch, tag or commit does not
	// exist in the remote. Retrying will not help until someone pushes it.
	ErrRefNotFound = errors.New("ref not found")

	// ErrPathNotFound means the device's folder does not exist at the
	// resolved commit, or holds no *.yaml or *.yml file.
	ErrPathNotFound = errors.New("path not found")

	// ErrSharedPathNotFound means a source path without {device} does not
	// exist at the resolved commit while other paths hold manifests. It
	// is an ErrPathNotFound too.
	ErrSharedPathNotFound = fmt.Errorf("source %w", ErrPathNotFound)

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

	// ErrQuarantined means the target commit was rolled back on this node
	// (a service did not become healthy after it was applied) and is not
	// applied again; a newer commit is.
	ErrQuarantined = errors.New("commit rolled back on this node")
)

// RedactURL strips the userinfo (user name and password or token) from a
// URL, so that it can be printed and logged: everything between "://" and
// the last "@". That is the userinfo even when the password holds a / ? #
// @ or space that should have been percent-encoded, and so the URL does not
// parse, or parses with the password in its path; a URL with an "@" in its
// path loses more than its userinfo. Strings that are not URLs with a scheme
// (local paths, scp-like "git@host:repo") are returned unchanged.
func RedactURL(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	rest := raw[i+3:]
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return raw
	}
	return raw[:i+3] + rest[at+1:]
}

// userinfoRE matches the "user:secret@" part of any URL in a text: up to
// the last "@" before the first space or quote.
var userinfoRE = regexp.MustCompile(`(://)[^\s"']*@`)

// redactedError hides credentials that a transport may have put into an
// error's text, keeping the error chain for errors.Is and errors.As.
type redactedError struct {
	err     error
	secrets []string // longest first
}

func (e *redactedError) Error() string {
	msg := e.err.Error()
	// A *url.Error quotes its URL: print it redacted. Its quoting escapes
	// characters, so the secrets below would not match there.
	var ue *url.Error
	if errors.As(e.err, &ue) && ue.URL != "" {
		msg = strings.ReplaceAll(msg, strconv.Quote(ue.URL), strconv.Quote(RedactURL(ue.URL)))
	}
	// The known secrets first: the pattern below stops at the first space,
	// and would cut a password holding "@" and a space in two, its second
	// half no longer one of them.
	for _, s := range e.secrets {
		msg = strings.ReplaceAll(msg, s, "***")
	}
	return userinfoRE.ReplaceAllString(msg, "$1")
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
	return &redactedError{err: err, secrets: urlSecrets(rawURL)}
}

// urlSecrets are the forms in which the credentials of rawURL may show in a
// message, longest first: the password (as written, decoded, encoded as
// url.URL.String writes it, and quoted by %q), and the whole userinfo of an
// http(s) URL (a token alone is a user name). They are found as RedactURL
// does, so a URL that does not parse still has its secret hidden.
func urlSecrets(rawURL string) []string {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	at := strings.LastIndexByte(rest, '@')
	if !ok || at < 0 {
		return nil
	}
	userinfo := rest[:at]
	var out []string
	add := func(s string) {
		if len(s) >= minSecretLen {
			out = append(out, s, strings.Trim(strconv.Quote(s), `"`))
		}
	}
	addForms := func(s string) {
		forms := []string{s}
		if d, err := url.PathUnescape(s); err == nil && d != s {
			forms = append(forms, d)
		}
		for _, f := range forms {
			add(f)
			add(strings.TrimPrefix(url.UserPassword("", f).String(), ":"))
		}
	}
	_, pass, hasPass := strings.Cut(userinfo, ":")
	if hasPass {
		addForms(pass)
	}
	if s := strings.ToLower(scheme); hasPass || s == "http" || s == "https" {
		addForms(userinfo)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// notFound is a message of its own that still matches one of the
// sentinels above with errors.Is.
func notFound(kind error, format string, args ...any) error {
	return errkind.New(kind, format, args...)
}
