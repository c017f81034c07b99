package gitsource

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/source"
)

const remoteName = "origin"

// endpoint splits the configured URL into what is stored as the clone's
// remote and the credentials to send. Credentials in an http(s) URL become
// basic auth, and a password in an ssh:// URL becomes ssh password auth, so
// they never reach the clone's config file on disk; an ssh user name is not
// a secret and stays. A local path is made absolute, because go-git runs
// git-upload-pack on it. An scp-like address ([user@]host:path, as git
// reads it: a colon before any slash) is ssh and is stored as given.
func endpoint(raw string) (stored string, auth transport.AuthMethod, err error) {
	switch urlKind(raw) {
	case kindNone:
		return "", nil, errors.New("no repository URL configured")
	case kindHTTP:
		u, err := parseURL(raw)
		if err != nil {
			return "", nil, err
		}
		if u.User != nil {
			pass, _ := u.User.Password()
			auth = &githttp.BasicAuth{Username: u.User.Username(), Password: pass}
			u.User = nil
		}
		return u.String(), auth, nil
	case kindSSH:
		return sshEndpoint(raw)
	case kindLocal:
		if _, statErr := os.Stat(raw); statErr == nil {
			abs, err := filepath.Abs(raw)
			if err != nil {
				return "", nil, fmt.Errorf("repository path %s: %w", raw, err)
			}
			return abs, nil, nil
		}
	}
	return raw, nil, nil
}

// sshEndpoint is endpoint for ssh:// URLs and scp-like addresses.
func sshEndpoint(raw string) (stored string, auth transport.AuthMethod, err error) {
	if !strings.Contains(raw, "://") {
		// As git: the host ends at the first colon, and a user name
		// comes before it. "user:secret@host:path" would be host "user"
		// to git; refuse it without printing it.
		userHost, p, _ := strings.Cut(raw, ":")
		at := strings.IndexByte(raw, '@')
		if at > len(userHost) && !strings.Contains(raw[:at], "/") && strings.Contains(raw[at:], ":") {
			return "", nil, errors.New("scp-like repository address user:password@host:path cannot carry a password; use source.auth.sshKeyFile")
		}
		if host := userHost[strings.IndexByte(userHost, '@')+1:]; host == "" || p == "" {
			return "", nil, fmt.Errorf("repository address %q is neither a URL, an existing local path, nor an scp-like [user@]host:path", raw)
		}
		return raw, nil, nil
	}
	u, err := parseURL(raw)
	if err != nil {
		return "", nil, err
	}
	if u.Host == "" || u.Path == "" {
		return "", nil, fmt.Errorf("ssh repository URL %s needs a host and a path, as in ssh://git@host:22/org/fleet.git", source.RedactURL(raw))
	}
	if u.User != nil {
		if pass, ok := u.User.Password(); ok {
			auth = &gitssh.Password{User: u.User.Username(), Password: pass}
			u.User = url.User(u.User.Username())
		}
	}
	return u.String(), auth, nil
}

// parseURL parses an http(s) or ssh URL. Its errors never hold the URL
// unredacted: a *url.Error quotes the URL, and its reason may quote a piece
// of the password (the "port" of https://user:pa/ss@host), so only the
// reason is kept, without what it quotes. A URL whose "@" comes after its
// host is refused: that is a password with an unencoded / ? or # in it,
// which would otherwise be sent to the wrong host and stored in the clone.
func parseURL(raw string) (*url.URL, error) {
	const hint = "; percent-encode / ? # @ and spaces in a user name, password or token (%2F %3F %23 %40 %20)"
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		msg := fmt.Sprintf("parse repository URL %s: %s", source.RedactURL(raw), quotedRE.ReplaceAllString(err.Error(), ""))
		if source.RedactURL(raw) != raw {
			msg += hint
		}
		return nil, errors.New(msg)
	}
	_, rest, _ := strings.Cut(raw, "://")
	if end := strings.IndexAny(rest, "/?#"); end >= 0 && strings.Contains(rest[end:], "@") {
		return nil, &permanentError{fmt.Errorf("repository URL %s has an @ after its host%s", source.RedactURL(raw), hint)}
	}
	return u, nil
}

// quotedRE matches a Go-quoted string (%q) and the space before it.
var quotedRE = regexp.MustCompile(`\s*"(?:[^"\\]|\\.)*"`)

// kind is what sort of address a source URL is.
type kind int

const (
	kindNone  kind = iota // empty
	kindLocal             // a path on this machine or file://
	kindHTTP              // http:// or https://
	kindSSH               // ssh:// or scp-like host:path
	kindOther             // another scheme go-git knows (git://)
)

func urlKind(raw string) kind {
	scheme, _, hasScheme := strings.Cut(raw, "://")
	switch {
	case raw == "":
		return kindNone
	case !hasScheme && manifest.IsLocalPath(raw):
		return kindLocal
	case !hasScheme:
		return kindSSH
	}
	switch strings.ToLower(scheme) {
	case "http", "https":
		return kindHTTP
	case "ssh":
		return kindSSH
	case "file":
		return kindLocal
	}
	return kindOther
}

// openClone opens the persistent bare clone in dir, making it the first
// time, and points its origin remote at remoteURL.
func openClone(dir, remoteURL string) (*git.Repository, error) {
	if dir == "" {
		return nil, errors.New("no clone folder (Options.Dir) given")
	}
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		// The fleet repo may hold what only tend should read.
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create clone folder: %w", err)
		}
		repo, err = git.PlainInit(dir, true)
	}
	if err != nil {
		return nil, fmt.Errorf("open clone %s: %w", dir, err)
	}
	if err := setRemote(repo, remoteURL); err != nil {
		return nil, fmt.Errorf("set remote of clone %s: %w", dir, err)
	}
	return repo, nil
}

// setRemote creates the origin remote or updates its URL when the
// configuration changed. Objects already fetched are kept: they are
// addressed by hash and stay valid whatever the remote.
func setRemote(repo *git.Repository, remoteURL string) error {
	cfg, err := repo.Config()
	if err != nil {
		return err
	}
	rc, ok := cfg.Remotes[remoteName]
	if ok && len(rc.URLs) == 1 && rc.URLs[0] == remoteURL {
		return nil
	}
	if !ok {
		rc = &config.RemoteConfig{
			Name:  remoteName,
			Fetch: []config.RefSpec{"+refs/heads/*:refs/remotes/origin/*"},
		}
		cfg.Remotes[remoteName] = rc
	}
	rc.URLs = []string{remoteURL}
	return repo.SetConfig(cfg)
}
