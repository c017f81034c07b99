package gitsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/tend-dev/tend/source"
)

// Source says where a device's manifests live and how far to trust them.
type Source struct {
	URL  string // local path, file://, http(s)://, ssh:// or scp-like host:path
	Ref  string // branch, tag or commit (full or abbreviated hash); "" = remote HEAD
	Path string // one folder inside the repo, placeholders expanded; "" or "." = root; used when Paths is empty
	Auth Auth   // credentials, read from files at each fetch
	// Paths are the folders inside the repo the device reads (see
	// readFiles for what a missing one means).
	Paths []source.Path

	// Trust, when set, names the signers a target commit must be signed
	// by: only a target commit whose signature verifies is returned.
	Trust Trust
	// LastApplied is the commit the node last applied ("" for none). A
	// target that does not descend from it is refused unless AllowRewind.
	LastApplied string
	AllowRewind bool
	// Quarantined holds commits (full hashes) this node rolled back, with
	// why: such a target is refused and the last applied commit held.
	Quarantined map[string]string
}

// Auth names the files credentials are read from; never the credentials.
type Auth struct {
	TokenFile             string // https: bearer-style token, sent as basic auth password
	UsernameFile          string // https: user name for basic auth
	PasswordFile          string // https: password for basic auth
	CAFile                string // https: PEM bundle of CAs to trust besides the system's
	SSHKeyFile            string // ssh: private key
	KnownHostsFile        string // ssh: required unless InsecureIgnoreHostKey
	InsecureIgnoreHostKey bool   // ssh: accept any host key (logged loudly)
}

// Options configure Fetch.
type Options struct {
	Dir    string       // the persistent bare clone, e.g. stateDir/git; created if missing
	Logger *slog.Logger // nil = discard
	// MaxCloneBytes bounds the clone's objects; 0 means
	// DefaultMaxCloneBytes, a negative value no bound.
	MaxCloneBytes int64
}

// paths returns src.Paths, or src.Path as the one path.
func (src Source) paths() []source.Path {
	if len(src.Paths) > 0 {
		return src.Paths
	}
	return []source.Path{{Dir: src.Path}}
}

// Log keys.
const (
	logKeyURL      = "url"
	logKeyRef      = "ref"
	logKeyRevision = "revision"
	logKeyFiles    = "files"
	logKeyDir      = "dir"
	logKeyError    = "error"
	logKeyAttempt  = "attempt"
	logKeyBytes    = "bytes"
)

// Fetch resolves src.Ref against the remote, brings its commit into the
// clone in opts.Dir when it is not there yet, and reads the manifest files
// under src's paths from that commit. When the commit is already in the clone
// the only network traffic is the ref advertisement (as git ls-remote), and
// none at all for a full commit hash.
func Fetch(ctx context.Context, src Source, opts Options) (*source.Snapshot, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	shown := source.RedactURL(src.URL)
	dirs, err := source.CleanPaths(src.paths())
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
	if d, ok := ctx.Deadline(); ok {
		acc = acc.withDeadline(d) // bounds an ssh handshake that never ends
	}
	defer closeIdle()
	recoverAside(opts.Dir)
	f := &fetcher{src: src, opts: opts, stored: stored, acc: acc, dirs: dirs, shown: shown, log: log}
	snap, err := f.run(ctx)
	if err != nil && ctx.Err() == nil && f.damaged(err) {
		// Only what the clone itself gave is damage: see damaged.
		// The clone is only a cache: a damaged one (power loss during a
		// fetch, a full disk) is thrown away and made again.
		log.WarnContext(ctx, "clone of the fleet repo is damaged; cloning again", logKeyDir, opts.Dir, logKeyError, err.Error())
		if rerr := removeClone(opts.Dir); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		snap, err = f.run(ctx)
	}
	return snap, err
}

// fetcher is one Fetch: what to read, and how to reach it.
type fetcher struct {
	src     Source
	opts    Options
	stored  string // the URL as the clone's remote stores it
	acc     access
	dirs    []source.Path // folders of the repo the device reads, cleaned
	shown   string        // the URL for messages
	log     *slog.Logger
	opened  bool // the clone opened; errors past here may mean damage
	pruning bool // cloning again for size: do not check the size again
}

func (f *fetcher) run(ctx context.Context) (snap *source.Snapshot, err error) {
	defer guard(&err)
	f.opened = false
	cleanTemp(f.opts.Dir)
	repo, err := openClone(f.opts.Dir, f.stored)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errDamaged, err)
	}
	f.opened = true
	snap, err = f.read(ctx, repo)
	if err == nil {
		f.prune(ctx, repo, plumbing.NewHash(snap.Revision.Commit))
		return snap, nil
	}
	cleanTemp(f.opts.Dir) // an interrupted fetch leaves its pack behind
	if errors.Is(ctx.Err(), context.Canceled) || f.damaged(err) {
		return nil, err // shutting down, or a clone to make again
	}
	// A fetch that ran out of time (a server that hangs or trickles, a
	// black-holed link) is held too: the hold reads the clone alone, with
	// no deadline to share.
	if held := f.hold(repo, err); held != nil {
		return held, nil
	}
	return nil, err
}

// read brings the target commit into the clone, checks it, and reads the
// device's files from it.
func (f *fetcher) read(ctx context.Context, repo *git.Repository) (*source.Snapshot, error) {
	rev, fetched, refspec, err := update(ctx, repo, f.src, f.acc, f.shown, f.log)
	if err != nil {
		return nil, err
	}
	commit, err := repo.CommitObject(rev)
	if err != nil {
		return nil, fmt.Errorf("read commit %s of %s: %w", rev, f.shown, err)
	}
	if why, ok := f.src.Quarantined[rev.String()]; ok {
		return nil, source.Refuse(source.ErrQuarantined, nil, "commit %s was rolled back on this node: %s; push a fix as a new commit, or run tend retry to try this one again", rev.String()[:12], why)
	}
	timed, err := verifyCommit(commit, f.src.Trust, f.shown)
	if err != nil {
		return nil, err
	}
	if err := f.checkRewind(ctx, repo, commit, refspec); err != nil {
		return nil, err
	}
	if timed && !strings.EqualFold(f.src.LastApplied, rev.String()) {
		// The applied commit was bounded when it was new.
		if err := f.checkTime(ctx, repo, commit, refspec); err != nil {
			return nil, err
		}
	}
	files, err := lastRead.files(f.opts.Dir, rev.String(), f.dirs, func() ([]source.File, error) { return readFiles(commit, f.dirs, f.shown) })
	if err != nil {
		return nil, err
	}
	msg := "unchanged"
	if fetched {
		msg = "fetched"
	}
	f.log.DebugContext(ctx, msg, logKeyURL, f.shown, logKeyRef, f.src.Ref,
		logKeyRevision, rev.String(), logKeyFiles, len(files))
	return &source.Snapshot{URL: f.shown, Revision: source.Revision{Ref: f.src.Ref, Commit: rev.String()}, Files: files, Fetched: fetched}, nil
}

// deepenSteps are the depths fetched, one after another, while the clone's
// history is too shallow to tell whether the target descends from the last
// applied commit: most updates are a few commits ahead, a device that was
// off for months may be thousands behind.
var deepenSteps = []int{16, 256, 4096, unshallow}

// checkRewind runs the rewind check, fetching deeper history of refspec
// when the shallow clone cannot answer it yet.
func (f *fetcher) checkRewind(ctx context.Context, repo *git.Repository, commit *object.Commit, refspec config.RefSpec) error {
	err := checkRewind(repo, commit, f.src, f.shown)
	for _, depth := range deepenSteps {
		if !errors.Is(err, errIncomplete) || refspec == "" {
			break
		}
		var inc *incompleteError
		if errors.As(err, &inc) && len(inc.edges) > 0 {
			if serr := markShallow(repo, inc.edges); serr != nil {
				return serr
			}
		}
		remote, rerr := repo.Remote(remoteName)
		if rerr != nil {
			return rerr
		}
		if ferr := fetch(ctx, f.log, remote, f.acc, f.src.URL, f.shown, depth, refspec); ferr != nil {
			return ferr
		}
		err = checkRewind(repo, commit, f.src, f.shown)
	}
	if errors.Is(err, errIncomplete) {
		return source.Refuse(source.ErrRewind, nil, "target %s of %s cannot be shown to descend from the last applied commit %s, even with the full history; refusing to rewind; set source.allowRewind: true, or run tend apply --allow-rewind once, to accept it",
			commit.Hash.String()[:12], f.shown, f.src.LastApplied[:12])
	}
	return err
}

// update makes sure the commit src.Ref names is in the clone and returns it;
// fetched says whether anything was fetched.
//
// refspec is what to fetch for deeper history of the target ("" for a
// commit no ref names, whose history is fetched whole).
func update(ctx context.Context, repo *git.Repository, src Source, acc access, shown string, log *slog.Logger) (h plumbing.Hash, fetched bool, refspec config.RefSpec, err error) {
	// A full hash names an immutable commit: once it is here, there is
	// nothing to ask the remote.
	if len(src.Ref) == 40 && looksLikeHash(src.Ref) {
		if h, ok, _ := localCommit(repo, src.Ref); ok {
			return h, false, "", nil
		}
	}
	remote, err := repo.Remote(remoteName)
	if err != nil {
		return h, false, "", err
	}
	var refs []*plumbing.Reference
	err = retry(ctx, log, shown, func() error {
		return fromRemote(func() (err error) {
			refs, err = listRefs(ctx, remote, acc)
			return err
		})
	})
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return h, false, "", fmt.Errorf("list refs of %s%s: %w", shown, hint(ctx, err, src.URL), redactErr(err, src.URL))
	}
	t, err := resolveRemote(refs, src.Ref, shown)
	if err != nil {
		return h, false, "", err
	}

	if t.prefix == "" {
		if h, err := peelToCommit(repo, t.hash); err == nil {
			return h, false, t.refspec, nil
		}
		if err := fetch(ctx, log, remote, acc, src.URL, shown, depthFor(repo), t.refspec); err != nil {
			return h, false, "", err
		}
		if _, err := peelToCommit(repo, t.hash); err != nil && isShallow(repo) {
			// The ref moved back to a commit past the clone's shallow edge:
			// the server took it as already here. Ask for it by depth,
			// which tells the server where the clone is shallow.
			if err := fetch(ctx, log, remote, acc, src.URL, shown, 1, t.refspec); err != nil {
				return h, false, "", err
			}
		}
		h, err := peelToCommit(repo, t.hash)
		if err != nil {
			return h, false, "", fmt.Errorf("ref %q of %s names %s, which is not a commit: %w", src.Ref, shown, t.hash, err)
		}
		return h, true, t.refspec, nil
	}

	// A commit no ref names: look here first, then fetch every branch and
	// tag and look again.
	if h, ok, err := localCommit(repo, t.prefix); err != nil || ok {
		return h, false, "", err
	}
	// Full history (as git's --unshallow): an older commit may lie past
	// the depth-1 first fetch.
	if err := fetch(ctx, log, remote, acc, src.URL, shown, unshallow, fetchAll...); err != nil {
		return h, false, "", err
	}
	h, ok, err := localCommit(repo, t.prefix)
	if err != nil {
		return h, false, "", err
	}
	if !ok {
		return h, false, "", notFound(ErrRefNotFound,
			"ref %q not found in %s (tried branch, tag and commit)", src.Ref, shown)
	}
	return h, true, "", nil
}

// unshallow is the depth git uses for "all of it".
const unshallow = 0x7fffffff

// depthFor chooses the depth of a fetch of one ref: 1 into an empty clone
// (a device needs the tip, not the history), else 0: only what is new since
// the commits the clone has. On a shallow clone the server then takes the
// clone's commits as complete; when the new history reaches past the
// clone's edge (a force-push), the rewind check finds commits missing and
// fetches deeper (deepenSteps), and that fetch tells the server where the
// clone is shallow.
func depthFor(repo *git.Repository) int {
	if emptyClone(repo) {
		return 1
	}
	return 0
}

// fetch fetches refspecs into the clone, retrying transient failures. The
// first fetch of one ref into an empty clone is shallow (depth 1): a device
// needs the tip, not the history. Later fetches bring only the commits
// since, so the clone keeps the history since the device started following
// the ref, which the rewind check walks.
func fetch(ctx context.Context, log *slog.Logger, remote *git.Remote, acc access, rawURL, shown string, depth int, refspecs ...config.RefSpec) error {
	err := retry(ctx, log, shown, func() error {
		return fromRemote(func() error {
			err := remote.FetchContext(ctx, &git.FetchOptions{
				RemoteName:   remoteName,
				RefSpecs:     refspecs,
				Depth:        depth,
				Auth:         acc.auth,
				CABundle:     acc.caBundle,
				ProxyOptions: acc.proxy,
				Tags:         git.NoTags,
				Force:        true,
			})
			if errors.Is(err, git.NoErrAlreadyUpToDate) {
				return nil
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("fetch %s: %w", shown, redactErr(err, rawURL))
	}
	return nil
}
