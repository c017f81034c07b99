package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/config"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/verify"
	"github.com/tend-dev/tend/ocisource"
	"github.com/tend-dev/tend/source"
)

// Snapshot fetches this device's manifests from the fleet repo, holding the
// stateDir lock while it updates the clone there, and changes nothing else.
func (r *Reconciler) Snapshot(ctx context.Context) (*source.Snapshot, error) {
	unlock, err := r.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	inv, err := applier.LoadInventory(r.Config.StateDir)
	if err != nil {
		return nil, err
	}
	f, err := r.fetcher()
	if err != nil {
		return nil, err
	}
	snap, err := fetch(ctx, r.Config, f, inv, nil)
	if err == nil && snap.Stale != nil {
		return nil, snap.Stale // validate and render speak of the target, not of what the node holds
	}
	return snap, err
}

// lock takes the stateDir lock, waiting at most LockTimeout.
func (r *Reconciler) lock(ctx context.Context) (func() error, error) {
	return applier.LockWithin(ctx, r.Config.StateDir, r.LockTimeout)
}

// newFetcher builds the source c names, keeping its copy on the node in
// dir (see config.NewFetcher).
func newFetcher(c *manifest.AgentConfig, dir string, ver *verify.Verifier, log *slog.Logger) (source.Fetcher, error) {
	return config.NewFetcher(c, dir, ver, log)
}

// sourceOnce is the fleet's source of a Reconciler, built at its first
// fetch and kept for its life, so that what it keeps (the registry
// session that makes a poll of an artifact one manifest HEAD) lasts from
// one tick to the next.
type sourceOnce struct {
	mu sync.Mutex
	f  source.Fetcher
}

// stopSource stops what the Reconciler's source downloads in the
// background (see source.Request.Stage), if it does.
func (r *Reconciler) stopSource() {
	r.src.mu.Lock()
	f := r.src.f
	r.src.mu.Unlock()
	if s, ok := f.(interface{ Stop() }); ok {
		s.Stop()
	}
}

// fetcher returns the Reconciler's source, built from its config at the
// first call (in SourceDir).
func (r *Reconciler) fetcher() (source.Fetcher, error) {
	r.src.mu.Lock()
	defer r.src.mu.Unlock()
	if r.src.f == nil {
		f, err := newFetcher(r.Config, config.SourceDir(r.Config), r.verifier(), r.logger())
		if err != nil {
			return nil, err
		}
		r.src.f = f
	}
	return r.src.f, nil
}

// fetch reads this device's manifests from the fleet's source with f. With
// inv nil, the node's state plays no part: no rewind check, no quarantine;
// the caller holds the lock otherwise.
func fetch(ctx context.Context, c *manifest.AgentConfig, f source.Fetcher, inv *applier.Inventory, stage func()) (*source.Snapshot, error) {
	ref, paths, err := c.ExpandSource()
	if err != nil {
		return nil, err
	}
	req := source.Request{Paths: config.SourcePaths(paths), AllowRewind: c.Source.AllowRewind, Stage: stage}
	if inv != nil {
		req.LastApplied, _ = source.ParseRevision(inv.Revision) // zero before the first apply
		q, err := applier.LoadQuarantine(c.StateDir)
		if err != nil {
			return nil, err
		}
		if len(q) > 0 {
			req.Quarantined = make(map[string]string, len(q))
			for commit, e := range q {
				req.Quarantined[commit] = e.Reason
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.Source.Timeout.D())
	defer cancel()
	snap, err := f.Fetch(ctx, req)
	where := source.RedactURL(c.Source.URL) + "@" + source.Revision{Ref: ref}.DisplayRef()
	what := "fleet repo"
	if ocisource.IsURL(c.Source.URL) {
		where, what = c.Source.URL, "fleet artifact"
	}
	explain := func(err error) error {
		var staging *source.StagingError
		if errors.Is(err, source.ErrQuarantined) || errors.As(err, &staging) {
			return err // the repo was fetched: the commit is refused here, or downloads
		}
		if errors.Is(err, source.ErrSharedPathNotFound) {
			return fmt.Errorf("source.paths of device %s in %s: %w", c.Device, where, err)
		}
		if errors.Is(err, source.ErrPathNotFound) {
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
	snap := res.Snapshot
	return snap == nil || !errors.Is(snap.Stale, source.ErrRefused)
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
