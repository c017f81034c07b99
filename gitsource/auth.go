package gitsource

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/tend-dev/tend/source"
)

// access is how to reach the remote: credentials, TLS roots, and for ssh
// the deadline of the connection (see withDeadline).
type access struct {
	auth     transport.AuthMethod
	caBundle []byte
	// proxy goes into git.ListOptions and git.FetchOptions as
	// ProxyOptions. It is never a real proxy: see deadlineScheme.
	proxy transport.ProxyOptions
}

// withDeadline returns a copy of a whose ssh connections fail at t: reads
// and writes, the server's banner and the handshake included, not only the
// TCP connect that go-git bounds. Call it per fetch with the deadline of
// the fetch's context. It changes nothing for http(s), local and git://
// remotes, whose transports watch the context, nor for a zero t.
func (a access) withDeadline(t time.Time) access {
	if _, ok := a.auth.(*sshAuth); ok && !t.IsZero() {
		a.proxy = deadlineProxy(t)
	}
	return a
}

// DefaultTokenUser is the basic-auth user name sent with a token when no
// usernameFile is set. Git hosts read a token from the password of basic
// auth: GitHub takes any user name ("x-access-token" in its docs for app
// tokens), GitLab any non-empty one for personal, project and group tokens,
// Gitea and Azure DevOps the same; "git" is what Flux's examples use. Hosts
// that want a particular name (Bitbucket's "x-token-auth", GitLab's
// "oauth2" for OAuth tokens, a deploy token's user) get it from
// usernameFile.
const DefaultTokenUser = "git"

// DefaultSSHUser is the ssh user when the URL names none, as in
// ssh://host/org/fleet.git: every Git host serves ssh as "git".
const DefaultSSHUser = "git"

// sshDialTimeout bounds the TCP connect of an ssh fetch: go-git's ssh
// transport does not watch the fetch's context until connected (the rest of
// the handshake is bounded by access.withDeadline).
const sshDialTimeout = 30 * time.Second

// Names of the source.auth fields, as the agent configuration spells them.
const (
	fieldToken      = "source.auth.tokenFile"
	fieldUsername   = "source.auth.usernameFile"
	fieldPassword   = "source.auth.passwordFile"
	fieldCA         = "source.auth.caFile"
	fieldSSHKey     = "source.auth.sshKeyFile"
	fieldKnownHosts = "source.auth.knownHostsFile"
	fieldInsecure   = "source.auth.insecureIgnoreHostKey"
)

// access reads the credential files a and returns how to reach the remote
// stored; urlAuth is what credentials the URL itself carried. Files are read
// on every call, so a rotated token or key is used on the next fetch; a
// credential from a file wins over one in the URL. A problem with the
// configuration is a permanent error (see IsPermanent).
func (a Auth) access(stored string, urlAuth transport.AuthMethod, log *slog.Logger) (access, error) {
	https, ssh := a.fields()
	shown := source.RedactURL(stored)
	var acc access
	var err error
	switch urlKind(stored) {
	case kindHTTP:
		if len(ssh) > 0 {
			err = fmt.Errorf("%s: for ssh only, but source.url %s is http(s)", strings.Join(ssh, ", "), shown)
			break
		}
		acc, err = a.httpAccess(stored, urlAuth, log)
	case kindSSH:
		if len(https) > 0 {
			err = fmt.Errorf("%s: for https only, but source.url %s is ssh", strings.Join(https, ", "), shown)
			break
		}
		acc, err = a.sshAccess(stored, urlAuth, log)
	default:
		acc = access{auth: urlAuth}
		if f := append(https, ssh...); len(f) > 0 {
			err = fmt.Errorf("%s: set, but source.url %s takes no credentials", strings.Join(f, ", "), shown)
		}
	}
	if err != nil {
		return access{}, &permanentError{err}
	}
	return acc, nil
}

// fields names the fields of a that are set, by the kind of URL they are for.
func (a Auth) fields() (https, ssh []string) {
	add := func(list *[]string, name string, set bool) {
		if set {
			*list = append(*list, name)
		}
	}
	add(&https, fieldToken, a.TokenFile != "")
	add(&https, fieldUsername, a.UsernameFile != "")
	add(&https, fieldPassword, a.PasswordFile != "")
	add(&https, fieldCA, a.CAFile != "")
	add(&ssh, fieldSSHKey, a.SSHKeyFile != "")
	add(&ssh, fieldKnownHosts, a.KnownHostsFile != "")
	add(&ssh, fieldInsecure, a.InsecureIgnoreHostKey)
	return https, ssh
}

// httpAccess sends a token, or a user name and password, as basic auth.
func (a Auth) httpAccess(stored string, urlAuth transport.AuthMethod, log *slog.Logger) (access, error) {
	shown := source.RedactURL(stored)
	acc := access{auth: urlAuth}
	if a.CAFile != "" {
		if !strings.HasPrefix(strings.ToLower(stored), "https://") {
			return access{}, fmt.Errorf("%s is set, but source.url %s is not https", fieldCA, shown)
		}
		pem, err := os.ReadFile(a.CAFile)
		if err != nil {
			return access{}, fmt.Errorf("%s: %w", fieldCA, err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return access{}, fmt.Errorf("%s %s holds no PEM certificate", fieldCA, a.CAFile)
		}
		acc.caBundle = pem
	}

	var field, file string // where the token or password is
	switch {
	case a.TokenFile != "" && a.PasswordFile != "":
		return access{}, fmt.Errorf("set %s or %s, not both", fieldToken, fieldPassword)
	case a.TokenFile != "":
		field, file = fieldToken, a.TokenFile
	case a.PasswordFile != "" && a.UsernameFile == "":
		return access{}, fmt.Errorf("%s needs %s (or use %s for a token)", fieldPassword, fieldUsername, fieldToken)
	case a.PasswordFile != "":
		field, file = fieldPassword, a.PasswordFile
	case a.UsernameFile != "":
		return access{}, fmt.Errorf("%s needs %s or %s", fieldUsername, fieldPassword, fieldToken)
	}
	if file != "" {
		user := DefaultTokenUser
		if a.UsernameFile != "" {
			u, err := readSecret(fieldUsername, a.UsernameFile)
			if err != nil {
				return access{}, err
			}
			user = u
		}
		secret, err := readSecret(field, file)
		if err != nil {
			return access{}, err
		}
		if urlAuth != nil {
			log.Debug("credentials in source.url ignored: source.auth files take precedence", logKeyURL, shown)
		}
		acc.auth = &githttp.BasicAuth{Username: user, Password: secret}
	}
	if acc.auth != nil && !strings.HasPrefix(strings.ToLower(stored), "https://") {
		log.Warn("credentials sent unencrypted: source.url is http, not https", logKeyURL, shown)
	}
	return acc, nil
}

// readSecret reads a one-line credential file, without its trailing
// newline. Errors name the field and the file, never the content.
func readSecret(field, file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s %s is empty", field, file)
	}
	return s, nil
}

// IsPermanent reports whether err from Fetch will come back, unchanged, on
// every retry until someone changes the configuration, the credentials or
// the repository: bad or missing credentials, a host key or TLS certificate
// that is not trusted, a repository, ref or path that does not exist, a
// source.auth that does not fit the URL. Callers wait for the next tick
// instead of retrying such errors quickly. Network trouble, timeouts and
// cancellation are not permanent.
func IsPermanent(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	for _, target := range []error{
		ErrRefNotFound, source.ErrPathNotFound,
		transport.ErrAuthenticationRequired, transport.ErrAuthorizationFailed,
		transport.ErrRepositoryNotFound, transport.ErrInvalidAuthMethod,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	var (
		perm    *permanentError
		hostKey *hostKeyError
		unknown x509.UnknownAuthorityError
		name    x509.HostnameError
		invalid x509.CertificateInvalidError
	)
	if errors.As(err, &perm) || errors.As(err, &hostKey) ||
		errors.As(err, &unknown) || errors.As(err, &name) || errors.As(err, &invalid) {
		return true
	}
	// golang.org/x/crypto/ssh gives these no type of their own.
	msg := err.Error()
	return strings.Contains(msg, "ssh: unable to authenticate") ||
		strings.Contains(msg, "ssh: no common algorithm for host key")
}
