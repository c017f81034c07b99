package gitsource

import (
	"errors"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/tend-dev/tend/internal/errkind"
	"github.com/tend-dev/tend/source"
)

// ErrRefNotFound means the configured branch, tag or commit does not
// exist in the remote. Retrying will not help until someone pushes it. The
// errors every source shares (a missing path, a refused target) are
// source's.
var ErrRefNotFound = errors.New("ref not found")

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
		msg = strings.ReplaceAll(msg, strconv.Quote(ue.URL), strconv.Quote(source.RedactURL(ue.URL)))
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

// notFound is a message of its own that still matches a not-found
// sentinel (ErrRefNotFound, source.ErrPathNotFound) with errors.Is.
func notFound(kind error, format string, args ...any) error {
	return errkind.New(kind, format, args...)
}
