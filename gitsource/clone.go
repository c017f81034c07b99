package gitsource

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

const remoteName = "origin"

// endpoint splits the configured URL into what is stored as the clone's
// remote and the credentials to send. Credentials in an http(s) URL become
// basic auth so they never reach the clone's config file on disk. A local
// path is made absolute, because go-git runs git-upload-pack on it.
func endpoint(raw string) (stored string, auth transport.AuthMethod, err error) {
	if raw == "" {
		return "", nil, errors.New("no repository URL configured")
	}
	if strings.HasPrefix(raw, "http://") || strings.HasPrefix(raw, "https://") {
		u, err := url.Parse(raw)
		if err != nil {
			return "", nil, fmt.Errorf("parse repository URL %s: %w", RedactURL(raw), redactErr(err, raw))
		}
		if u.User != nil {
			pass, _ := u.User.Password()
			auth = &githttp.BasicAuth{Username: u.User.Username(), Password: pass}
			u.User = nil
		}
		return u.String(), auth, nil
	}
	if !strings.Contains(raw, "://") {
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

// openClone opens the persistent bare clone in dir, making it the first
// time, and points its origin remote at remoteURL.
func openClone(dir, remoteURL string) (*git.Repository, error) {
	if dir == "" {
		return nil, errors.New("no clone folder (Options.Dir) given")
	}
	repo, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
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
