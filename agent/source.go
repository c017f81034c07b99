package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/ocisource"
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
	return fetchInto(ctx, c, inv, SourceDir(c), log)
}

// fetchInto reads this device's manifests from the fleet repo into the
// clone in dir (or, from a published artifact, into the artifacts kept
// in dir). With inv nil, the node's state plays no part: no rewind check,
// no quarantine.
func fetchInto(ctx context.Context, c *manifest.AgentConfig, inv *applier.Inventory, dir string, log *slog.Logger) (*gitsource.Snapshot, error) {
	ref, paths, err := c.ExpandSource()
	if err != nil {
		return nil, err
	}
	oci := ocisource.IsURL(c.Source.URL)
	src := gitsource.Source{URL: c.Source.URL, Ref: ref, Paths: SourcePaths(paths), AllowRewind: c.Source.AllowRewind}
	if inv != nil {
		src.LastApplied = lastApplied(inv, ref)
		if oci {
			// An artifact's revision names the ref it was published
			// from, whatever the URL's tag: the commit alone counts.
			_, src.LastApplied, _ = strings.Cut(inv.Revision, "@sha1:")
		}
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
	var snap *gitsource.Snapshot
	where := gitsource.RedactURL(c.Source.URL) + "@" + displayRef(ref)
	what := "fleet repo"
	if oci {
		where, what = c.Source.URL, "fleet artifact"
		snap, err = ocisource.Fetch(ctx, ocisource.Source{URL: c.Source.URL, Paths: src.Paths, LastApplied: src.LastApplied,
			AllowRewind: src.AllowRewind, Quarantined: src.Quarantined}, ocisource.Options{Dir: dir, Client: ociClient(c), Logger: log})
	} else {
		snap, err = gitsource.Fetch(ctx, src, gitsource.Options{Dir: dir, Logger: log})
	}
	explain := func(err error) error {
		if errors.Is(err, gitsource.ErrQuarantined) {
			return err // the repo was fetched: the commit is refused here
		}
		if errors.Is(err, gitsource.ErrSharedPathNotFound) {
			return fmt.Errorf("source.paths of device %s in %s: %w", c.Device, where, err)
		}
		if errors.Is(err, gitsource.ErrPathNotFound) {
			return fmt.Errorf("no manifests for device %s at %s in %s: %w", c.Device, displayPaths(paths), where, err)
		}
		return fmt.Errorf("fetch %s: %w", what, err)
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
func GitDir(stateDir string) string { return statedir.Dir(stateDir).Git() }

// OCIDir is where the fleet artifacts of an oci:// source are kept
// unpacked: the target's, and the last applied one's.
func OCIDir(stateDir string) string { return string(statedir.Dir(stateDir).OCI()) }

// SourceDir is where c's source is kept on the node: OCIDir for an
// oci:// source, else GitDir.
func SourceDir(c *manifest.AgentConfig) string {
	if ocisource.IsURL(c.Source.URL) {
		return OCIDir(c.StateDir)
	}
	return GitDir(c.StateDir)
}

// ociClients keep a registry session per registry configuration from one
// tick to the next, so that a poll is one manifest HEAD.
var ociClients sync.Map

func ociClient(c *manifest.AgentConfig) *ocisource.Client {
	key := fmt.Sprintf("%q %q", c.Registries.Insecure, c.Registries.DockerConfig)
	if v, ok := ociClients.Load(key); ok {
		return v.(*ocisource.Client)
	}
	v, _ := ociClients.LoadOrStore(key, ocisource.NewClient(RegistryOptions(c)))
	return v.(*ocisource.Client)
}

// appliedSnapshot reads the applied commit from the node's copy of the
// source, with no remote: from the clone (a commit named by its full hash
// that is in the clone needs no fetch), or from the artifact kept for it.
func appliedSnapshot(ctx context.Context, c *manifest.AgentConfig, commit string, paths []manifest.SourcePath, log *slog.Logger) (*gitsource.Snapshot, error) {
	if ocisource.IsURL(c.Source.URL) {
		return ocisource.Applied(OCIDir(c.StateDir), c.Source.URL, commit, SourcePaths(paths))
	}
	// No key ring: the commit was verified when it was applied.
	src := gitsource.Source{URL: c.Source.URL, Ref: commit, Paths: SourcePaths(paths), LastApplied: commit, Auth: GitAuth(c)}
	return gitsource.Fetch(ctx, src, gitsource.Options{Dir: GitDir(c.StateDir), Logger: log})
}

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
