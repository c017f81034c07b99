package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"

	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/internal/errkind"
	"github.com/tend-dev/tend/source"
)

// Retries of a transient failure within one fetch: a flaky link gets a
// second and third chance (after 0.5 s, then 2 s) before the tick gives up.
var (
	retryAttempts = 3
	retryBackoff  = backoff.Exponential{Initial: 500 * time.Millisecond, Factor: 4}
)

// retry runs op until it succeeds, fails for good, or the retries run out.
// Only network trouble is retried; a wrong password or a missing ref fails
// at once (retrying those only hammers the server).
func retry(ctx context.Context, log *slog.Logger, shown string, op func() error) error {
	err := op()
	for attempt := 1; attempt < retryAttempts; attempt++ {
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		log.DebugContext(ctx, "retrying", logKeyURL, shown, logKeyAttempt, attempt+1, logKeyError, redactAny(err))
		if backoff.Sleep(ctx, retryBackoff.Delay(attempt)) != nil {
			return err
		}
		err = op()
	}
	return err
}

// transient reports whether err looks like network trouble that may pass.
// Local trouble (a full disk, a read-only file system, permissions) is not:
// it is reported as what it is, not as an unreachable server.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || IsPermanent(err) {
		return false
	}
	if errors.Is(err, source.ErrRefused) {
		// A commit fetched and then refused here (rolled back, a rewind,
		// unsigned): its reason may quote a health probe's "connection
		// refused", but the repo was reached.
		return false
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return false
	}
	switch httpStatus(err) {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true // a server or proxy that is briefly overloaded or restarting
	}
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &op) || errors.As(err, &dns) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "connection reset", "no such host", "i/o timeout", "unexpected EOF", "502 Bad Gateway", "503 Service Unavailable", "504 Gateway Timeout"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// httpStatus returns the HTTP status of a failed smart-HTTP request, or 0.
func httpStatus(err error) int {
	var he *githttp.Err
	if errors.As(err, &he) {
		return he.StatusCode()
	}
	var ue *plumbing.UnexpectedError
	if errors.As(err, &ue) && errors.As(ue.Err, &he) {
		return he.StatusCode()
	}
	return 0
}

// hint says what to check after a failure to list the refs of the
// repository at rawURL.
func hint(ctx context.Context, err error, rawURL string) string {
	if urlKind(rawURL) == kindLocal {
		if h := localHint(strings.TrimPrefix(rawURL, "file://")); h != "" {
			return h
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return " (timed out: raise source.timeout or check the link)"
	case IsPermanent(err):
		return " (check source.url and the credentials, host key or CA in source.auth)"
	case transient(err):
		return " (check source.url or --repo, and that the server is reachable)"
	}
	return ""
}

// localHint says what is wrong with a repository path on this machine, ""
// when it is a folder: a path that does not exist is a typo to fix, not a
// matter of credentials.
func localHint(path string) string {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return " (no such file or folder on this machine: check source.url or --repo)"
	case err == nil && !fi.IsDir():
		return " (a file, not a Git repository: check source.url or --repo)"
	case err == nil:
		if _, err := git.PlainOpen(path); errors.Is(err, git.ErrRepositoryNotExists) {
			return " (a folder that is not a Git repository: check source.url or --repo)"
		}
	}
	return ""
}

// cleanTemp removes what an interrupted fetch leaves in the clone (a
// partial pack), so a slow link that times out every tick does not fill
// the disk.
func cleanTemp(dir string) {
	for _, pattern := range []string{"objects/pack/tmp_pack_*", "objects/pack/tmp_idx_*", "objects/tmp_obj_*", "objects/*/tmp_obj_*"} {
		matches, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, m := range matches {
			_ = os.Remove(m)
		}
	}
}

// redactAny strips URL credentials from an error's text, for logs.
func redactAny(err error) string { return redactErr(err, "").Error() }

// hold falls back to the last applied commit when the target cannot be
// used: the remote is unreachable, the credentials are refused, or the
// target is unsigned, a rewind or has no manifests. The agent then still
// holds the node at its last applied state (and reverts drift); the cause
// is kept in Snapshot.Stale and reported. It returns nil when there is no
// last applied commit in the clone to hold.
func (f *fetcher) hold(repo *git.Repository, cause error) *source.Snapshot {
	if len(f.src.LastApplied) != 40 {
		return nil
	}
	h := plumbing.NewHash(f.src.LastApplied)
	commit, err := repo.CommitObject(h)
	if err != nil {
		return nil
	}
	files, err := readFiles(commit, f.dirs, f.shown)
	if err != nil {
		return nil
	}
	stale := fmt.Errorf("holding the last applied commit %s: %w", f.src.LastApplied[:12], cause)
	switch {
	case errors.Is(cause, source.ErrQuarantined):
		stale = fmt.Errorf("%w; holding the last applied commit %s", cause, f.src.LastApplied[:12])
	case transient(cause):
		stale = fmt.Errorf("%s is unreachable; holding the last applied commit %s from the local clone: %w", f.shown, f.src.LastApplied[:12], cause)
	}
	return &source.Snapshot{URL: f.shown, Revision: source.Revision{Ref: f.src.Ref, Commit: h.String()}, Files: files, Stale: stale}
}

// damaged reports whether err, from a clone that opened, may come from a
// damaged clone rather than from the remote or the manifests. What the
// remote sent (its ref advertisement, its packs) never counts: a hostile
// or broken server must not make tend delete its last known good clone.
func (f *fetcher) damaged(err error) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return false // a full disk: a new clone would not fit either
	}
	// What only the clone's own files can cause, even while fetching.
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Path, f.opts.Dir) || errors.Is(err, dotgit.ErrEmptyRefFile) {
		return true
	}
	if transient(err) || errors.Is(err, ErrRefNotFound) || errors.Is(err, source.ErrPathNotFound) ||
		errors.Is(err, source.ErrUnverified) || errors.Is(err, source.ErrRewind) || IsPermanent(err) || errors.Is(err, errRemote) {
		return false
	}
	if errors.Is(err, errDamaged) || errors.Is(err, plumbing.ErrObjectNotFound) || errors.Is(err, git.ErrRepositoryNotExists) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"zlib", "packfile", "invalid object", "malformed", "bad signature", "unexpected EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return !f.opened
}

// removeClone deletes a clone folder, renaming it aside first so a crash
// half-way never leaves a half-deleted clone that opens.
func removeClone(dir string) error {
	aside := dir + ".damaged"
	_ = os.RemoveAll(aside)
	if err := os.Rename(dir, aside); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("move damaged clone aside: %w", err)
	}
	return os.RemoveAll(aside)
}

// emptyClone reports whether the clone has fetched nothing yet.
func emptyClone(repo *git.Repository) bool {
	iter, err := repo.References()
	if err != nil {
		return false
	}
	defer iter.Close()
	empty := true
	_ = iter.ForEach(func(r *plumbing.Reference) error {
		if r.Name() != plumbing.HEAD {
			empty = false
			return storer.ErrStop
		}
		return nil
	})
	return empty
}

// isShallow reports whether the clone lacks history past some commits.
func isShallow(repo *git.Repository) bool {
	s, err := repo.Storer.Shallow()
	return err == nil && len(s) > 0
}

// markShallow records commits whose parents the clone lacks as shallow, so
// the next deepening fetch asks the server for their history.
func markShallow(repo *git.Repository, edges []plumbing.Hash) error {
	have, err := repo.Storer.Shallow()
	if err != nil {
		return err
	}
	seen := map[plumbing.Hash]bool{}
	for _, h := range have {
		seen[h] = true
	}
	for _, h := range edges {
		if !seen[h] {
			seen[h] = true
			have = append(have, h)
		}
	}
	return repo.Storer.SetShallow(have)
}

// errDamaged marks a failure that can only come from a damaged clone.
var errDamaged = errors.New("damaged clone")

// errRemote marks a failure while talking to the remote: listing its refs
// or fetching from it. Whatever it says, it is not the clone's damage.
var errRemote = errors.New("remote")

// fromRemote runs op, which talks to the remote, and marks what it returns
// (or a panic in go-git while it parses what the remote sent) as the
// remote's.
func fromRemote(op func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errkind.New(errRemote, "the remote sent what go-git could not read: %v", r)
		}
	}()
	if err := op(); err != nil {
		return errkind.Mark(errRemote, err)
	}
	return nil
}

// guard turns a panic inside go-git (it panics on some truncated packs)
// into an error, so a damaged clone is cloned again instead of crashing
// the agent on every tick.
func guard(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: reading the clone failed: %v", errDamaged, r)
	}
}

// DefaultMaxCloneBytes bounds the clone: past it, a converged device clones
// again at depth 1, so months of commits do not fill a small disk.
const DefaultMaxCloneBytes = 64 << 20

// MaxClonePacks bounds the packs of the clone as DefaultMaxCloneBytes bounds
// its size: every fetch of a new commit adds one, and reading the clone
// costs time in the number of packs (a no-op tick takes 1.5 ms with one,
// 23 ms with 40, 110 ms with 200), so a device that takes a commit a day
// would slow down all year.
var MaxClonePacks = 16

// prune clones again, shallow, when the clone has grown past its bounds
// and the device is converged on rev (the last applied commit): the new
// clone starts at rev, so the rewind check still has it. The new clone is
// made beside the old one and takes its place only once it is complete: a
// fetch that fails keeps the old clone, the last known good.
func (f *fetcher) prune(ctx context.Context, repo *git.Repository, rev plumbing.Hash) {
	bound := f.opts.MaxCloneBytes
	if bound == 0 {
		bound = DefaultMaxCloneBytes
	}
	if bound < 0 || f.pruning || rev.String() != f.src.LastApplied {
		return
	}
	size, packs := packStats(f.opts.Dir)
	if size <= bound && packs <= MaxClonePacks {
		return
	}
	what := "size"
	if size <= bound {
		what = "pack count"
	}
	f.log.InfoContext(ctx, "clone is past its "+what+" bound; cloning again at depth 1", logKeyDir, f.opts.Dir, logKeyBytes, size, "packs", packs)
	fresh := f.opts.Dir + freshSuffix
	_ = os.RemoveAll(fresh)
	g := *f
	g.opts.Dir, g.pruning = fresh, true
	if _, err := g.run(ctx); err != nil {
		_ = os.RemoveAll(fresh)
		f.log.WarnContext(ctx, "clone again failed; the old clone is kept", logKeyError, redactAny(err))
		return
	}
	aside := f.opts.Dir + asideSuffix
	_ = os.RemoveAll(aside)
	if err := os.Rename(f.opts.Dir, aside); err != nil {
		_ = os.RemoveAll(fresh)
		f.log.WarnContext(ctx, "could not replace the old clone", logKeyError, err.Error())
		return
	}
	if err := atomicfile.Rename(fresh, f.opts.Dir); err != nil {
		_ = os.Rename(aside, f.opts.Dir)
		_ = os.RemoveAll(fresh)
		f.log.WarnContext(ctx, "could not replace the old clone", logKeyError, err.Error())
		return
	}
	_ = os.RemoveAll(aside)
}

// Where prune makes the new clone, and puts the old one while it swaps
// them.
const (
	freshSuffix = ".fresh"
	asideSuffix = ".old"
)

// recoverAside puts back the clone a prune killed between its two renames
// left aside.
func recoverAside(dir string) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		_ = os.Rename(dir+asideSuffix, dir)
	}
}

// packStats adds up the size of the clone's packs and counts them: one
// folder listing, cheap enough for every converged tick. go-git writes what
// it fetches as packs.
func packStats(dir string) (size int64, packs int) {
	entries, _ := os.ReadDir(filepath.Join(dir, "objects", "pack"))
	for _, e := range entries {
		if fi, err := e.Info(); err == nil {
			size += fi.Size()
		}
		if strings.HasSuffix(e.Name(), ".pack") {
			packs++
		}
	}
	return size, packs
}
