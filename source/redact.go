package source

import "strings"

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
