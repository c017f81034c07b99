package applier

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Verdict is a release whose services an apply started and has not yet
// judged, kept in statedir's verdict.json: it is written before a
// service of the release is started (again before each further one) and
// removed once the plan's run is over, healthy or rolled back. A tend
// killed in between (kill -9, a power cut, the OOM killer) finds it at its
// next apply or agent start and judges the release again (ResumeVerdict)
// instead of taking it as applied.
type Verdict struct {
	Revision string `json:"revision"` // the release, ref@sha1:commit
	// Previous is the revision applied before it, which a rollback puts
	// back.
	Previous string `json:"previous"`
	// Keys are what made the release new (see releaseKeys): what is
	// quarantined when it is unhealthy.
	Keys []VerdictKey `json:"keys"`
	// Services are the runners the apply started, or was about to start,
	// in plan order, each with the spec it was started from.
	Services []VerdictService `json:"services"`
	Since    time.Time        `json:"since"` // when the first wait began
}

// VerdictKey is one quarantine key of a Verdict, as releaseKeys makes it.
type VerdictKey struct {
	Key      string `json:"key"`
	Revision string `json:"revision"`
	Tag      string `json:"tag,omitempty"`
	Applied  string `json:"applied,omitempty"`
}

// VerdictService is a runner a Verdict waits for: its id, and the hash of
// the spec it was started from (render.Service.Hash).
type VerdictService struct {
	ID   string `json:"id"`
	Spec string `json:"spec"`
}

// Verifier is a Runner that can judge again, in a later tend, what an
// interrupted apply started: Verify waits, as Apply does after a start,
// until resource id, started from the spec whose hash is spec, is
// healthy, and returns why not otherwise.
type Verifier interface {
	Verify(ctx context.Context, id, spec string) error
}

// LoadVerdict returns the release awaiting its verdict in stateDir, or nil.
func LoadVerdict(stateDir string) (*Verdict, error) {
	var v Verdict
	found, err := statedir.ReadJSON(statedir.Dir(stateDir).Verdict(), &v)
	if err != nil || !found {
		return nil, err
	}
	return &v, nil
}

// clearVerdict removes verdict.json; one that is not there is no error.
func clearVerdict(stateDir string) error {
	if err := os.Remove(statedir.Dir(stateDir).Verdict()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("clear the release awaiting its verdict: %w", err)
	}
	return nil
}

// awaiting is the Verdict of the plan an apply runs, written before each
// of its runners starts.
type awaiting struct {
	written *Verdict // as last written; nil while nothing is
}

// before records, ahead of act (a runner's start or update), that release
// d awaits its verdict: the runners started so far and act, and what the
// resources ids (undoable actions so far, act included) made new against
// inv as it was before the plan. A plan that makes nothing new (a restart
// after drift) has nothing to quarantine, and records nothing.
func (w *awaiting) before(a *Applier, inv *Inventory, d *render.Desired, act planner.Action, ids []string) error {
	keyed := releaseKeys(inv, d, ids, "", time.Time{})
	if len(keyed) == 0 {
		return nil
	}
	v := Verdict{Revision: d.Revision, Previous: inv.Revision, Since: a.now().UTC()}
	if w.written != nil {
		v.Since, v.Services = w.written.Since, slices.Clone(w.written.Services)
	}
	for _, k := range keyed {
		v.Keys = append(v.Keys, VerdictKey{Key: k.Key, Revision: k.Revision, Tag: k.Tag, Applied: k.Applied})
	}
	spec := ""
	if s, ok := d.Specs[act.Resource].(render.Service); ok {
		spec = s.Hash
	}
	v.Services = append(v.Services, VerdictService{ID: act.Resource, Spec: spec})
	if err := statedir.WriteJSON(a.stateDir, statedir.VerdictFile, v, 0o644); err != nil {
		return fmt.Errorf("record that %s awaits its verdict before starting %s (it was not started): %w", d.Revision, act.Resource, err)
	}
	w.written = &v
	failpoint.Hit("verdict:recorded")
	return nil
}

// done removes the record once the plan's run is over: its runners were
// judged healthy, or the release is quarantined and rolled back. A record
// left behind (a failed removal) is judged again by the next tend, which
// finds the services healthy, or the release already quarantined.
func (w *awaiting) done(ctx context.Context, a *Applier) {
	if w.written == nil {
		return
	}
	if err := clearVerdict(a.stateDir); err != nil {
		a.logger.WarnContext(ctx, "verdict", logKeyRevision, w.written.Revision, logKeyError, err.Error())
	}
}

// VerdictError says a release that a killed tend left awaiting its
// verdict (see Verdict) was judged unhealthy when the wait was resumed:
// it is quarantined as a rollback quarantines it, and the tick that
// follows puts back the revision applied before it.
type VerdictError struct {
	Revision string // the release judged
	Previous string // the revision applied before it
	Failed   string // the runner that did not become healthy
	Cause    error
}

func (e *VerdictError) Error() string {
	return fmt.Sprintf("%s did not become healthy: %v (judged again after tend was interrupted while waiting for it); "+
		"%s is quarantined and rolled back to %s", e.Failed, e.Cause, e.Revision, e.Previous)
}

func (e *VerdictError) Unwrap() error { return e.Cause }

// ResumeVerdict judges the release a killed tend left awaiting its
// verdict, if any; the caller holds the stateDir lock and calls it before
// it reads the fleet's source, so that a release it quarantines is not
// taken again in the same tick. It waits for each service recorded, as
// the apply did, with a full startup grace from now (the time the killed
// tend had waited is not counted: its instance may have been started
// again since). Healthy, the record is removed and nil returned. Unhealthy,
// the release's keys are quarantined as a rollback quarantines them, the
// record is removed, and a *VerdictError returned: the caller's tick then
// finds the release refused and puts back the revision applied before it.
// A release already quarantined (killed during its rollback) is not
// waited for.
func (a *Applier) ResumeVerdict(ctx context.Context) error {
	v, err := LoadVerdict(a.stateDir)
	if errors.Is(err, statedir.ErrCorrupt) {
		// A record cut short says nothing to judge by: dropped, so that
		// it does not stop every tick; the release stays as applied.
		a.logger.WarnContext(ctx, "the release awaiting its verdict cannot be read; forgetting it", logKeyError, err.Error())
		return clearVerdict(a.stateDir)
	}
	if err != nil || v == nil {
		return err
	}
	q, err := LoadQuarantine(a.stateDir)
	if err != nil {
		return err
	}
	if decided(v, q) {
		return clearVerdict(a.stateDir)
	}
	a.logger.WarnContext(ctx, "tend was interrupted while a release awaited its verdict; waiting for its services again",
		logKeyRevision, v.Revision, logKeySince, v.Since.Format(time.RFC3339))
	// As an apply's waits do, the waits run on past the tick's end for
	// the shutdown grace: a wait the tick's timeout cuts short is a
	// verdict (not healthy in the time a tick has), or the record would
	// be waited for, and cut short, by every tick after it.
	wctx, stop := a.graced(ctx)
	defer stop()
	for _, s := range v.Services {
		vf, ok := a.drivers[kindOf(s.ID)].(Verifier)
		if !ok {
			continue // nothing this tend can judge it by
		}
		failpoint.Hit("verdict:waiting")
		cause := vf.Verify(wctx, s.ID, s.Spec)
		if cause == nil {
			continue
		}
		if wctx.Err() != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return fmt.Errorf("wait for %s: %w", s.ID, wctx.Err()) // shutting down: judged again next time
		}
		ctx := context.WithoutCancel(ctx) // what follows is written whatever the tick's time
		reason := fmt.Sprintf("%s did not become healthy: %v", s.ID, cause)
		keyed := make([]Keyed, 0, len(v.Keys))
		at := a.now().UTC()
		for _, k := range v.Keys {
			keyed = append(keyed, Keyed{Key: k.Key, Quarantined: Quarantined{Revision: k.Revision, Tag: k.Tag, Applied: k.Applied, Reason: reason, At: at}})
		}
		a.logger.ErrorContext(ctx, "rolling back", logKeyResource, s.ID, logKeyError, cause.Error())
		if err := a.quarantine(ctx, keyed); err != nil {
			return err
		}
		if err := clearVerdict(a.stateDir); err != nil {
			a.logger.WarnContext(ctx, "verdict", logKeyRevision, v.Revision, logKeyError, err.Error())
		}
		return &VerdictError{Revision: v.Revision, Previous: v.Previous, Failed: s.ID, Cause: cause}
	}
	a.logger.InfoContext(ctx, "release healthy", logKeyRevision, v.Revision)
	return clearVerdict(a.stateDir)
}

// decided reports whether every key of v is quarantined already.
func decided(v *Verdict, q map[string]Quarantined) bool {
	for _, k := range v.Keys {
		if _, ok := q[k.Key]; !ok {
			return false
		}
	}
	return len(v.Keys) > 0
}

// kindOf is the kind of resource id; an id of no kind has none.
func kindOf(id string) planner.Kind {
	k, _ := planner.KindOf(id)
	return k
}
