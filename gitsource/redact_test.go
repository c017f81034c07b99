package gitsource

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/source"
)

// badSecrets are passwords and tokens as a person may paste them into a URL,
// unencoded. Each ends in a marker that only the secret holds.
var badSecrets = []string{
	"ab/cdSECRET",
	"12/cdSECRET", // https://alice:12/... parses: host alice, port 12
	"ab cdSECRET",
	"ab#cdSECRET",
	"12#cdSECRET",
	"ab?cdSECRET",
	"12?cdSECRET",
	"ab@cdSECRET",
	"a/b c#d?e@fSECRET",
	"ab\"cd\tSECRET",
	"ab%zzSECRET",
	"äb/cdSECRET",
}

// secretURLs are URLs of every scheme that takes credentials, carrying
// secret.
func secretURLs(secret string) []string {
	return []string{
		"https://alice:" + secret + "@127.0.0.1:18080/fleet",
		"http://" + secret + "@127.0.0.1:18080/fleet",
		"ssh://git:" + secret + "@127.0.0.1:2222/fleet.git",
	}
}

// requireHidden fails when text holds secret, or enough of it to matter:
// the marker, or the part before its first special character.
func requireHidden(t *testing.T, text, secret string) {
	t.Helper()
	require.NotContains(t, text, "SECRET")
	require.NotContains(t, text, "cdSECRET")
	require.NotContains(t, text, secret)
	require.NotContains(t, text, strings.TrimPrefix(url.UserPassword("", secret).String(), ":"))
	require.NotContains(t, text, fmt.Sprintf("%q", secret))
}

func TestRedactURLUnencodedSecret(t *testing.T) {
	for _, secret := range badSecrets {
		for _, raw := range secretURLs(secret) {
			shown := source.RedactURL(raw)
			requireHidden(t, shown, secret)
			require.True(t, strings.HasSuffix(shown, "127.0.0.1:18080/fleet") || strings.HasSuffix(shown, "127.0.0.1:2222/fleet.git"), shown)
		}
	}
}

func TestRedactErrUnencodedSecret(t *testing.T) {
	for _, secret := range badSecrets {
		for _, raw := range secretURLs(secret) {
			_, perr := url.Parse(raw)
			for _, err := range []error{
				perr, // a *url.Error, or nil for a URL that parses
				&url.Error{Op: "Get", URL: raw + "/info/refs?service=git-upload-pack", Err: errors.New("dial tcp: i/o timeout")},
				fmt.Errorf("connect to %s failed", raw),
				fmt.Errorf("wrapped: %w", fmt.Errorf("remote said %q", raw)),
				errors.New("auth failed for " + secret + " as " + url.UserPassword("git", secret).String()),
			} {
				if err == nil {
					continue
				}
				got := redactErr(fmt.Errorf("fetch: %w", err), raw)
				requireHidden(t, got.Error(), secret)
				require.ErrorIs(t, got, err, "the chain is kept")
			}
		}
	}
}

// TestFetchUnencodedSecret: the error from Fetch, whether the URL does not
// parse or parses with the secret outside its userinfo, hides the secret.
func TestFetchUnencodedSecret(t *testing.T) {
	for _, secret := range badSecrets {
		for _, raw := range secretURLs(secret) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			src := Source{URL: raw, Ref: "main", Auth: Auth{InsecureIgnoreHostKey: strings.HasPrefix(raw, "ssh:")}}
			_, err := Fetch(ctx, src, Options{Dir: filepath.Join(t.TempDir(), "git")})
			cancel()
			require.Error(t, err, raw)
			requireHidden(t, err.Error(), secret)
		}
	}
}

// TestParseURLHint: the message says what is wrong, without the URL's
// pieces that url.Parse quotes.
func TestParseURLHint(t *testing.T) {
	_, _, err := endpoint("https://alice:ab/cdSECRET@127.0.0.1:18080/fleet")
	require.EqualError(t, err, "parse repository URL https://127.0.0.1:18080/fleet: invalid port after host; percent-encode / ? # @ and spaces in a user name, password or token (%2F %3F %23 %40 %20)")
	_, _, err = endpoint("https://alice:12/cdSECRET@127.0.0.1:18080/fleet")
	require.ErrorContains(t, err, "repository URL https://127.0.0.1:18080/fleet has an @ after its host")
	require.True(t, IsPermanent(err))
	_, _, err = endpoint("https://host/%zz")
	require.EqualError(t, err, "parse repository URL https://host/%zz: invalid URL escape")
}
