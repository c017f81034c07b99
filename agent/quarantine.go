package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/source"
)

// quarantine records the release rb rolled back by what made it new: the
// commit when it moved since before; otherwise each model digest the plan
// moved (and rb put back), under applier.ReleaseKey, so that resolution
// skips it. A rollback of what was already applied, with no new digest (a
// restart after drift), quarantines nothing: holding it would hold
// nothing; the loop's backoff spaces the retries instead.
func (r *Reconciler) quarantine(ctx context.Context, t *tick, before source.Revision, rb *applier.RollbackError) error {
	if t.res.Snapshot == nil {
		return nil
	}
	q := applier.Quarantined{Revision: rb.Revision, Reason: rb.Error(), At: r.now().UTC()}
	if !before.SameCommit(t.res.Snapshot.Revision) {
		// This commit broke a service: never apply it again here.
		if err := applier.Quarantine(r.Config.StateDir, t.res.Snapshot.Revision.Commit, q); err != nil {
			return fmt.Errorf("record rolled-back commit: %w", err)
		}
		return nil
	}
	var keyed []applier.Keyed
	for _, a := range t.res.Plan.Actions {
		if a.Kind != planner.KindModel || a.Type == planner.Delete || a.Skipped() || a.OnlyDrift() || !slices.Contains(rb.RolledBack, a.Resource) {
			continue
		}
		m, ok := t.res.Desired.Model(planner.ModelName(a.Resource))
		if !ok || !strings.HasPrefix(m.Digest, "sha256:") {
			continue
		}
		key := applier.ReleaseKey(a.Resource, m.Digest)
		keyed = append(keyed, applier.Keyed{Key: key, Quarantined: applier.Quarantined{Revision: key, Tag: m.Tag, Reason: q.Reason, At: q.At}})
		r.logger().WarnContext(ctx, "quarantined", keyDevice, r.Config.Device, keyResource, a.Resource, keyRevision, key)
	}
	if len(keyed) == 0 {
		return nil
	}
	if err := applier.Quarantine(r.Config.StateDir, keyed[0].Key, keyed[0].Quarantined, keyed[1:]...); err != nil {
		return fmt.Errorf("record rolled-back release: %w", err)
	}
	return nil
}

// Quarantined says why models were kept off their newest version, which
// was rolled back on this node (see render.Desired.Quarantined), or is nil.
func (r *Result) Quarantined() error {
	if r.Desired == nil {
		return nil
	}
	return r.Desired.Quarantined
}

// errQuarantine joins err with the failure to record its quarantine.
func errQuarantine(err, qerr error) error {
	if qerr == nil {
		return err
	}
	return errors.Join(err, qerr)
}
