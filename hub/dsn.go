package hub

import (
	"errors"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// redactedValue stands for a password in a database URL as logs, errors
// and the page show it.
const redactedValue = "xxxxx"

// RedactDSN is a database URL (or a PostgreSQL key=value connection
// string) as logs and errors show it: the userinfo password, and the value
// of every query parameter or key whose name holds "password" (PostgreSQL's
// password and sslpassword) replaced by xxxxx. A URL that does not parse
// is not shown at all, for its password cannot be told from the rest.
func RedactDSN(dsn string) string {
	if !strings.Contains(dsn, "://") {
		return redactKeyValues(dsn)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		scheme, _, _ := strings.Cut(dsn, "://")
		if validScheme(scheme) {
			return scheme + "://(a URL that does not parse, not shown)"
		}
		return "(a URL that does not parse, not shown)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), redactedValue)
	}
	u.RawQuery = redactQuery(u.RawQuery)
	u.ForceQuery = false
	return u.String()
}

// redactQuery masks the values of the password parameters of a raw query,
// leaving the rest as written. A key is compared as PostgreSQL's driver
// reads it: percent-decoded and trimmed (and here case-folded too).
func redactQuery(raw string) string {
	if raw == "" {
		return ""
	}
	pairs := strings.Split(raw, "&")
	for i, pair := range pairs {
		key, _, hasValue := strings.Cut(pair, "=")
		if hasValue && secretKey(key) {
			pairs[i] = key + "=" + redactedValue
		}
	}
	return strings.Join(pairs, "&")
}

// secretKey tells a parameter whose value is a secret.
func secretKey(raw string) bool {
	key, err := url.QueryUnescape(raw)
	if err != nil {
		key = raw
	}
	return strings.Contains(strings.ToLower(strings.TrimSpace(key)), "password")
}

// keyValueRE finds key = value in a PostgreSQL connection string: the
// value quoted with single quotes (backslash escapes), or up to a space.
var keyValueRE = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)(\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)`)

// redactKeyValues masks the password values of a key=value connection
// string ("host=db password=secret").
func redactKeyValues(s string) string {
	return keyValueRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := keyValueRE.FindStringSubmatch(m)
		if !secretKey(sub[1]) {
			return m
		}
		return sub[1] + sub[2] + redactedValue
	})
}

// validScheme tells a URL scheme as RFC 3986 spells one.
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// isKeyValueDSN tells a PostgreSQL key=value connection string, which the
// hub does not take (it names its database by URL).
func isKeyValueDSN(s string) bool {
	return !strings.Contains(s, "://") && keyValueRE.MatchString(s) && strings.Contains(s, "=")
}

// redactURL is s without its userinfo password, for a URL that is not a
// database's (a webhook's).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// passwordHint is what to do when PostgreSQL refused the hub's login.
func passwordHint(d dialect, err error) string {
	var pgErr *pgconn.PgError
	if d != postgres || !errors.As(err, &pgErr) || !strings.HasPrefix(pgErr.Code, "28") { // invalid_authorization_specification, invalid_password
		return ""
	}
	return "; check the user and password, and give the password in PGPASSWORD, a password file (~/.pgpass, or PGPASSFILE), --db-file or TEND_HUB_DB rather than on the command line"
}

// DSNHasPassword tells a database URL (or key=value string) that holds a
// password, which a process's command line shows to every user of the
// machine.
func DSNHasPassword(dsn string) bool {
	if !strings.Contains(dsn, "://") {
		return redactKeyValues(dsn) != dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return true // it cannot be told: say so
	}
	if _, has := u.User.Password(); has {
		return true
	}
	return redactQuery(u.RawQuery) != u.RawQuery
}
