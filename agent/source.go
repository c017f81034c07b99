package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/manifest"
)

// Snapshot fetches this device's manifests from the fleet repo, holding the
// stateDir lock while it updates the clone there, and changes nothing else.
func (r *Reconciler) Snapshot(ctx context.Context) (*gitsource.Snapshot, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	inv, err := applier.LoadInventory(r.Config.StateDir)
	if err != nil {
		return nil, err
	}
	snap, err := fetch(ctx, r.Config, inv, r.logger())
	if err == nil && snap.Stale != nil {
		return nil, snap.Stale // validate and render speak of the target, not of what the node holds
	}
	return snap, err
}

// lock takes the stateDir lock, waiting at most LockTimeout.
func (r *Reconciler) lock(ctx context.Context) (func() error, error) {
	timeout := r.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	lockCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	unlock, err := applier.Lock(lockCtx, r.Config.StateDir)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err() // shutting down, not a second tend
	}
	return unlock, err
}

// fetch reads this device's manifests from the fleet repo into the clone in
// stateDir; the caller holds the lock.
func fetch(ctx context.Context, c *manifest.AgentConfig, inv *applier.Inventory, log *slog.Logger) (*gitsource.Snapshot, error) {
	return fetchInto(ctx, c, inv, GitDir(c.StateDir), log)
}

// fetchInto reads this device's manifests from the fleet repo into the
// clone in dir. With inv nil, the node's state plays no part: no rewind
// check, no quarantine.
func fetchInto(ctx context.Context, c *manifest.AgentConfig, inv *applier.Inventory, dir string, log *slog.Logger) (*gitsource.Snapshot, error) {
	ref, paths, err := c.ExpandSource()
	if err != nil {
		return nil, err
	}
	src := gitsource.Source{URL: c.Source.URL, Ref: ref, Paths: SourcePaths(paths), AllowRewind: c.Source.AllowRewind}
	if inv != nil {
		src.LastApplied = lastApplied(inv, ref)
		q, err := applier.LoadQuarantine(c.StateDir)
		if err != nil {
			return nil, err
		}
		if len(q) > 0 {
			src.Quarantined = make(map[string]string, len(q))
			for commit, e := range q {
				src.Quarantined[commit] = e.Reason
			}
		}
	}
	src.Auth = GitAuth(c)
	if v := c.Source.Verify; v != nil {
		src.Keyring = v.Keyring
	}
	ctx, cancel := context.WithTimeout(ctx, c.Source.Timeout.D())
	defer cancel()
	snap, err := gitsource.Fetch(ctx, src, gitsource.Options{Dir: dir, Logger: log})
	explain := func(err error) error {
		if errors.Is(err, gitsource.ErrQuarantined) {
			return err // the repo was fetched: the commit is refused here
		}
		if errors.Is(err, gitsource.ErrSharedPathNotFound) {
			return fmt.Errorf("source.paths of device %s in %s@%s: %w", c.Device, gitsource.RedactURL(c.Source.URL), displayRef(ref), err)
		}
		if errors.Is(err, gitsource.ErrPathNotFound) {
			return fmt.Errorf("no manifests for device %s at %s in %s@%s: %w", c.Device, displayPaths(paths), gitsource.RedactURL(c.Source.URL), displayRef(ref), err)
		}
		return fmt.Errorf("fetch fleet repo: %w", err)
	}
	if err != nil {
		return nil, explain(err)
	}
	if snap.Stale != nil {
		snap.Stale = explain(snap.Stale)
	}
	return snap, nil
}

// fetchFailed reports whether a tick failed to fetch the fleet repo. A
// target that was fetched and then refused on this node (rolled back here,
// a rewind, an unverified commit) was fetched: the node is held at its last
// applied commit for that reason, not for the repo.
func fetchFailed(res *Result) bool {
	if res.FailedStep != StepFetch {
		return false
	}
	if snap := res.Snapshot; snap != nil {
		for _, refused := range []error{gitsource.ErrQuarantined, gitsource.ErrRewind, gitsource.ErrUnverified} {
			if errors.Is(snap.Stale, refused) {
				return false
			}
		}
	}
	return true
}

// lastApplied returns the commit of the last revision applied in full from
// ref, "" before the first. A device moved to another ref by its own config
// (say from main to devices/cam-017) starts its rewind check over: the new
// ref need not descend from the old one, and the move was made on the node,
// not pushed to the repo.
func lastApplied(inv *applier.Inventory, ref string) string {
	from, commit, _ := strings.Cut(inv.Revision, "@sha1:")
	if shortRef(from) != shortRef(displayRef(ref)) {
		return ""
	}
	return commit
}

// shortRef names refs/heads/main and main alike.
func shortRef(ref string) string {
	for _, p := range []string{"refs/heads/", "refs/tags/"} {
		ref = strings.TrimPrefix(ref, p)
	}
	return ref
}

// Revision names a snapshot as plans and status print it: ref@sha1:commit.
func Revision(s *gitsource.Snapshot) string {
	return displayRef(s.Ref) + "@sha1:" + s.Revision
}

// displayRef names an empty ref (the remote's default branch) as HEAD.
func displayRef(ref string) string {
	if ref == "" {
		return "HEAD"
	}
	return ref
}

// GitDir is where the persistent clone of the fleet repo lives.
func GitDir(stateDir string) string { return stateDir + "/git" }

func displayPath(p string) string {
	if p == "" || p == "." {
		return "the repo root"
	}
	return p
}

// displayPaths names the source paths of a device: "devices/cam-017", or
// "profiles, devices/cam-017".
func displayPaths(paths []manifest.SourcePath) string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = displayPath(p.Dir)
	}
	return strings.Join(names, ", ")
}

// SourcePaths are the expanded source paths as gitsource reads them.
func SourcePaths(paths []manifest.SourcePath) []gitsource.Path {
	out := make([]gitsource.Path, len(paths))
	for i, p := range paths {
		out[i] = gitsource.Path{Dir: p.Dir, PerDevice: p.PerDevice()}
	}
	return out
}

// GitAuth is the credentials of the fleet repo, from the agent config.
func GitAuth(c *manifest.AgentConfig) gitsource.Auth {
	a := c.Source.Auth
	if a == nil {
		return gitsource.Auth{}
	}
	return gitsource.Auth{TokenFile: a.TokenFile, UsernameFile: a.UsernameFile, PasswordFile: a.PasswordFile,
		CAFile: a.CAFile, SSHKeyFile: a.SSHKeyFile, KnownHostsFile: a.KnownHostsFile, InsecureIgnoreHostKey: a.InsecureIgnoreHostKey}
}
