package gitsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Source says where a device's manifests live and how far to trust them.
type Source struct {
	URL  string // local path, file://, http(s)://, ssh:// or scp-like host:path
	Ref  string // branch, tag or commit (full or abbreviated hash); "" = remote HEAD
	Path string // folder inside the repo, placeholders already expanded; "" or "." = root
	Auth Auth   // credentials, read from files at each fetch

	// Keyring, when set, is an armored OpenPGP key ring: only a target
	// commit whose signature verifies against it is returned.
	Keyring string
	// LastApplied is the commit the node last applied ("" for none). A
	// target that does not descend from it is refused unless AllowRewind.
	LastApplied string
	AllowRewind bool
}

// Auth names the files credentials are read from; never the credentials.
type Auth struct {
	TokenFile             string // https: bearer-style token, sent as basic auth password
	UsernameFile          string // https: user name for basic auth
	PasswordFile          string // https: password for basic auth
	CAFile                string // https: PEM bundle of CAs to trust instead of the system's
	SSHKeyFile            string // ssh: private key
	KnownHostsFile        string // ssh: required unless InsecureIgnoreHostKey
	InsecureIgnoreHostKey bool   // ssh: accept any host key (logged loudly)
}

// Options configure Fetch.
type Options struct {
	Dir    string       // the persistent bare clone, e.g. stateDir/git; created if missing
	Logger *slog.Logger // nil = discard
}

// File is one manifest file read from the commit.
type File struct {
	Path string // repo-relative, slash-separated, e.g. devices/cam-017/models.yaml
	Data []byte
}

// Snapshot is what Fetch read: one device's manifest files at one commit.
type Snapshot struct {
	URL      string // redacted: no userinfo
	Ref      string // what was asked for
	Revision string // full commit hash
	Files    []File // every *.yaml / *.yml under Path (recursively), sorted by Path
	Fetched  bool   // false when the commit was already in the clone and nothing was fetched
}

// String names the snapshot in messages: "URL@ref (rev[:12])".
func (s *Snapshot) String() string {
	ref := s.Ref
	if ref == "" {
		ref = "HEAD"
	}
	rev := s.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	return fmt.Sprintf("%s@%s (%s)", s.URL, ref, rev)
}

// Log keys.
const (
	logKeyURL      = "url"
	logKeyRef      = "ref"
	logKeyRevision = "revision"
	logKeyFiles    = "files"
)

// Fetch resolves src.Ref against the remote, brings its commit into the
// clone in opts.Dir when it is not there yet, and reads the manifest files
// under src.Path from that commit. When the commit is already in the clone
// the only network traffic is the ref advertisement (as git ls-remote), and
// none at all for a full commit hash.
func Fetch(ctx context.Context, src Source, opts Options) (*Snapshot, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	shown := RedactURL(src.URL)
	dir, err := cleanPath(src.Path)
	if err != nil {
		return nil, err
	}
	stored, urlAuth, err := endpoint(src.URL)
	if err != nil {
		return nil, err
	}
	acc, err := src.Auth.access(stored, urlAuth, log)
	if err != nil {
		return nil, err
	}
	repo, err := openClone(opts.Dir, stored)
	if err != nil {
		return nil, err
	}
	rev, fetched, err := update(ctx, repo, src, acc, shown)
	if err != nil {
		return nil, err
	}
	commit, err := repo.CommitObject(rev)
	if err != nil {
		return nil, fmt.Errorf("read commit %s of %s: %w", rev, shown, err)
	}
	if err := verifyCommit(commit, src.Keyring, shown); err != nil {
		return nil, err
	}
	if err := checkRewind(repo, commit, src, shown); err != nil {
		return nil, err
	}
	files, err := readFiles(commit, dir, shown)
	if err != nil {
		return nil, err
	}
	msg := "unchanged"
	if fetched {
		msg = "fetched"
	}
	log.DebugContext(ctx, msg, logKeyURL, shown, logKeyRef, src.Ref,
		logKeyRevision, rev.String(), logKeyFiles, len(files))
	return &Snapshot{URL: shown, Ref: src.Ref, Revision: rev.String(), Files: files, Fetched: fetched}, nil
}

// update makes sure the commit src.Ref names is in the clone and returns it;
// fetched says whether anything was fetched.
func update(ctx context.Context, repo *git.Repository, src Source, acc access, shown string) (plumbing.Hash, bool, error) {
	// A full hash names an immutable commit: once it is here, there is
	// nothing to ask the remote.
	if len(src.Ref) == 40 && looksLikeHash(src.Ref) {
		if h, ok, _ := localCommit(repo, src.Ref); ok {
			return h, false, nil
		}
	}
	remote, err := repo.Remote(remoteName)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	refs, err := listRefs(ctx, remote, acc)
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return plumbing.ZeroHash, false, fmt.Errorf("list refs of %s (check source.url or --repo, and that the server is reachable): %w", shown, redactErr(err, src.URL))
	}
	t, err := resolveRemote(refs, src.Ref, shown)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}

	if t.prefix == "" {
		if h, err := peelToCommit(repo, t.hash); err == nil {
			return h, false, nil
		}
		if err := fetch(ctx, remote, acc, src.URL, shown, t.refspec); err != nil {
			return plumbing.ZeroHash, false, err
		}
		h, err := peelToCommit(repo, t.hash)
		if err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("ref %q of %s names %s, which is not a commit: %w", src.Ref, shown, t.hash, err)
		}
		return h, true, nil
	}

	// A commit no ref names: look here first, then fetch every branch and
	// tag and look again.
	if h, ok, err := localCommit(repo, t.prefix); err != nil || ok {
		return h, false, err
	}
	if err := fetch(ctx, remote, acc, src.URL, shown, fetchAll...); err != nil {
		return plumbing.ZeroHash, false, err
	}
	h, ok, err := localCommit(repo, t.prefix)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	if !ok {
		return plumbing.ZeroHash, false, notFound(ErrRefNotFound,
			"ref %q not found in %s (tried branch, tag and commit)", src.Ref, shown)
	}
	return h, true, nil
}

// fetch fetches refspecs into the clone. Depth stays 0 (full history) for
// now; shallow fetches for small devices come later.
func fetch(ctx context.Context, remote *git.Remote, acc access, rawURL, shown string, refspecs ...config.RefSpec) error {
	err := remote.FetchContext(ctx, &git.FetchOptions{
		RemoteName: remoteName,
		RefSpecs:   refspecs,
		Auth:       acc.auth,
		CABundle:   acc.caBundle,
		Tags:       git.NoTags,
		Force:      true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("fetch %s: %w", shown, redactErr(err, rawURL))
	}
	return nil
}
