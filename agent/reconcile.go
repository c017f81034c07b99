package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/drift"
	"github.com/tend-dev/tend/gating"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
	"github.com/tend-dev/tend/source"
)

// Log keys, so every line of every tick uses the same names.
const (
	keyDevice     = "device"
	keyRevision   = "revision"
	keyResult     = "result"
	keyDuration   = "duration"
	keyError      = "error"
	keyResource   = "resource"
	keyResources  = "resources"
	keyReason     = "reason"
	keyAdd        = "add"
	keyChange     = "change"
	keyDelete     = "delete"
	keyUnchanged  = "unchanged"
	keyDrift      = "drift"
	keyFetched    = "fetched"
	keySchedule   = "schedule"
	keyJitter     = "jitter"
	keyVersion    = "version"
	keyListen     = "listen"
	keyDownloaded = "downloaded"
	keySuspended  = "suspended"
	keyHeld       = "held"
	keyPath       = "path"
	keyReserve    = "reserve"
)

// Steps of a tick, as Result.FailedStep names them.
const (
	StepOpen    = "open"
	StepFetch   = "fetch"
	StepRender  = "render"
	StepDecide  = "decide"
	StepObserve = "observe"
	StepPlan    = "plan"
	StepApply   = "apply"
)

// Reconciler runs one reconcile for the device its config names.
type Reconciler struct {
	composed composeCache // the last composition, reused while its inputs are the same
	nodes    nodeCache    // the node's drivers, opened by the first tick and kept
	// observations counts the observations of the node, one a tick.
	observations atomic.Int64
	src          sourceOnce // the fleet's source, built once (see fetcher)
	verify       verifierOnce
	gating       gating.Decider // decides each tick's release; keeps the hub and gate that did not answer

	Config *manifest.AgentConfig
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// LockTimeout bounds the wait for another tend using the same stateDir;
	// zero means applier.DefaultLockTimeout.
	LockTimeout time.Duration
	// Supervisor runs services; nil starts them detached without watching
	// (a one-shot apply). The agent's loop sets a watching one.
	Supervisor *service.Supervisor
	// Diff makes Plan set the diff of every update (see planner.ContentDiff).
	Diff bool
	// LogDrift logs a warning per drifted resource once the plan is made,
	// before the apply reverts it. The agent's loop sets it; a one-shot
	// plan or apply prints the drift in its plan instead.
	LogDrift bool
	// Meter, when set, is shown how model downloads move (the CLI's
	// progress line on a terminal).
	Meter transport.Meter
	// Stager, when set (the agent's loop), stages releases in the
	// background: a tick never waits for a download (see decide). Nil
	// downloads in the apply, in the foreground.
	Stager *Stager
	// Version and Commit are this tend's, written in stateDir's format
	// marker when a tick migrates the stateDir (statedir.Dir.Migrate).
	Version, Commit string
}

// Result is what one reconcile saw and did.
type Result struct {
	Snapshot *source.Snapshot
	// Composed says how the device's manifests were composed (the layers
	// that applied, where each resource and variable came from), once
	// rendered.
	Composed *manifest.Composed
	// Desired is the device's rendered desired state, once rendered.
	Desired *render.Desired
	Plan    *planner.Changeset
	Drift   []drift.Event
	Applied []planner.Action
	// Skipped lists the actions the apply left out: they will fail, or
	// are held (see planner.Action.Skipped).
	Skipped []planner.Action
	// Failed is the action that failed, if one did.
	Failed *planner.Action
	// RolledBack lists the resources put back when the plan was rolled
	// back.
	RolledBack []string
	// Started is when the tick began; Duration how long it took.
	Started  time.Time
	Duration time.Duration
	// Downloaded is the bytes pulled from registries.
	Downloaded int64
	// FailedStep names the step that failed (StepOpen … StepApply), ""
	// when none did.
	FailedStep string
	// Declared lists the ids of the desired resources, once rendered.
	Declared []string
	// Notes holds what observers said of resources the plan leaves alone:
	// a service in a crash loop.
	Notes map[string]string
	// Info describes declared resources for status: a model's ref and the
	// digest it resolved to.
	Info map[string]string
	// Held says why the target was not taken, or is nil; Snapshot, Desired
	// and Plan are then those of the applied revision.
	Held *HeldRelease
	// Staging says how the release the tick's target needs goes, while
	// it stages in the background (see Stager); nil when none does.
	Staging *Staging
	// Quarantine lists the releases rolled back on this node, oldest
	// first, as an apply left them; nil for a tick that did not apply.
	Quarantine []applier.Quarantined
	// Release says when this device first saw the release of the tick's
	// target, and whether the tick activated it (see decide); nil when
	// the tick did not get to decide, or is no apply with a Stager or a
	// Rollout.
	Release *status.SeenRelease
	// Wave is the device's wave in the Rollout of the tick's target
	// (rollout.NoWave: none takes it); nil without a rollout, or when the
	// tick did not get to decide.
	Wave *int
	// Rollout is the name of that Rollout ("" with Wave nil).
	Rollout string
	// TargetRelease is the release of the tick's target as the status
	// reports it (see targetRelease); nil when the tick did not get to
	// decide. AppliedRelease is the key of the release the node runs
	// once the tick applied; "" when it did not get to apply.
	TargetRelease  *status.Release
	AppliedRelease api.ReleaseKey
	// Staged lists the models StageOnly brought into the store.
	Staged []StagedModel
	// Agent is the agent that runs on the stateDir of a one-shot apply
	// (see ApplyOnce), or nil.
	Agent *RunningAgent
}

// Offline says why models were kept at their applied version because their
// registry could not be asked (see render.Desired.Offline), or is nil.
func (r *Result) Offline() error {
	if r.Desired == nil {
		return nil
	}
	return r.Desired.Offline
}

// staging says the tick's target release stages in the background and
// no rollout holds it: the status's result and the tick's log line say
// staging (tend_reconcile_total counts what its reverts did).
func (r *Result) staging() bool { return r.Staging != nil && r.Held == nil }

// Outcome names the result for logs and metrics (status.ResultSuccess,
// status.ResultNoop, status.ResultError).
func (r *Result) Outcome(err error) string {
	return status.Outcome(err, len(r.Applied))
}

// tick carries the state of one reconcile from step to step.
type tick struct {
	res      Result
	node     *node
	observed planner.Observed
	upTo     string // the last step to run
	hold     bool   // a hold (see Hold): the applied revision, reverts only
	verdict  error  // a resumed verdict of unhealthy (see resumeVerdict)
}

type step struct {
	name string
	run  func(ctx context.Context, t *tick) error
}

// Render fetches and renders, as a tick does, and looks at nothing else on
// the node: models are resolved by the model driver (held at the version
// active here when their registry cannot be asked). Paths are checked
// against allowPaths only when the config has some: render also serves to
// look at a device's state from a machine that is not the device.
func (r *Reconciler) Render(ctx context.Context) (*Result, error) {
	return r.run(ctx, StepRender)
}

// Plan fetches, renders, observes and plans, and changes nothing on the node.
func (r *Reconciler) Plan(ctx context.Context) (*Result, error) {
	return r.run(ctx, StepPlan)
}

// Apply reconciles once: it plans and then applies the plan.
func (r *Reconciler) Apply(ctx context.Context) (*Result, error) {
	return r.run(ctx, StepApply)
}

func (r *Reconciler) run(ctx context.Context, upTo string) (*Result, error) {
	start := r.now()
	if err := r.checkState(); err != nil {
		return &Result{}, err
	}
	unlock, err := r.lock(ctx)
	if err != nil {
		return &Result{}, err
	}
	defer unlock()
	if upTo == StepApply {
		// Only an apply writes: a plan reads an older format as it is.
		if err := r.migrateState(r.logger()); err != nil {
			return &Result{}, err
		}
	}
	res, err := r.runLocked(ctx, upTo, start)
	if err == nil && upTo == StepApply {
		r.dropFormatCopies()
	}
	return res, err
}

// runLocked runs the steps up to upTo of a tick that began at start; the
// caller holds the stateDir lock.
func (r *Reconciler) runLocked(ctx context.Context, upTo string, start time.Time) (_ *Result, err error) {
	t := &tick{upTo: upTo, res: Result{Started: start}}
	defer func() { err = t.judged(err) }()
	if upTo == StepApply {
		defer func() {
			// What a rollback of this tick quarantined counts too.
			if q, err := applier.Releases(r.Config.StateDir); err == nil {
				t.res.Quarantine = q
			}
		}()
	}
	if err := r.steps(ctx, t, []step{
		{StepOpen, r.open},
		{StepOpen, r.resumeVerdict},
		{StepFetch, r.fetch},
		{StepRender, r.render},
		{StepDecide, r.decide},
		{StepObserve, r.observe},
		{StepPlan, r.planTick},
		{StepApply, r.applyPlan},
	}); err != nil {
		return &t.res, err
	}
	if snap := t.res.Snapshot; snap != nil && snap.Stale != nil {
		// The node was held at its last applied commit; the tick still
		// failed to use the target, and says why.
		t.res.FailedStep = StepFetch
		return &t.res, snap.Stale
	}
	if d := t.res.Desired; d != nil && d.Held != nil && upTo == StepRender {
		err := d.Held
		return &t.res, err // models whose new ref could not be resolved
	}
	if upTo == StepPlan {
		// Actions that will fail or are held: an apply leaves them out
		// and fails, so the plan says so too.
		return &t.res, t.res.Plan.Skip()
	}
	return &t.res, nil
}

// steps runs steps in order up to t.upTo, stopping at the first that
// fails, and times the tick.
func (r *Reconciler) steps(ctx context.Context, t *tick, steps []step) error {
	defer func() { t.res.Duration = r.now().Sub(t.res.Started) }()
	for _, s := range steps {
		if err := s.run(ctx, t); err != nil {
			t.res.FailedStep = s.name
			return err
		}
		if s.name == t.upTo {
			break
		}
	}
	return nil
}

// open makes the drivers and the applier, or takes those of the last tick,
// and begins this tick; the applier's inventory (read once) serves the
// source's rewind check and the observer.
func (r *Reconciler) open(_ context.Context, t *tick) error {
	n, err := r.nodes.open(r.Config, r.Supervisor, r.Meter, r.verifier(), r.now, r.logger())
	if err != nil {
		return err
	}
	t.node = n
	return nil
}

func (r *Reconciler) fetch(ctx context.Context, t *tick) error {
	if t.verdict != nil {
		return r.fetchApplied(ctx, t) // a rollback (see resumeVerdict)
	}
	inv, err := t.node.applier.Inventory()
	if err != nil {
		return err
	}
	f, err := r.fetcher()
	if err != nil {
		return err
	}
	var stage func()
	if r.Stager != nil && t.upTo == StepApply {
		stage = r.Stager.ready
	}
	snap, err := fetch(ctx, r.Config, f, inv, stage)
	var staging *source.StagingError
	if stage != nil && errors.As(err, &staging) {
		// The target's artifact downloads beside the ticks: hold the
		// applied revision meanwhile (nothing, before the first apply).
		st := r.Stager.source(staging)
		t.res.Staging = &st
		t.hold = true
		return r.fetchApplied(ctx, t)
	}
	if r.Stager != nil && err == nil {
		r.Stager.source(nil)
	}
	if err != nil {
		return err
	}
	if snap.Stale != nil && t.upTo == StepRender {
		return snap.Stale // render speaks of the target, not of what the node holds
	}
	t.res.Snapshot = snap
	return nil
}

// render loads and validates the device's manifests and renders them,
// pinning every model through the model driver.
func (r *Reconciler) render(ctx context.Context, t *tick) error {
	if t.hold || t.verdict != nil {
		return r.renderApplied(ctx, t) // the target's source is downloading, or a rollback
	}
	confine := t.upTo != StepRender || len(r.Config.AllowPaths) > 0
	comp, err := r.composed.load(r.Config, t.res.Snapshot, confine)
	if err != nil {
		return err
	}
	t.res.Composed = comp
	for _, w := range comp.Warnings {
		r.logger().WarnContext(ctx, "manifest warning", keyDevice, r.Config.Device, keyReason, w.Error())
	}
	opts := RenderOptions(r.Config, t.node.resolver())
	opts.CheckAllowPaths = confine
	t.res.Desired, err = render.Render(ctx, comp.Device, t.res.Snapshot.Revision.String(), opts)
	return err
}

func (r *Reconciler) observe(ctx context.Context, t *tick) error {
	r.observations.Add(1)
	obs, err := t.node.applier.Observe(ctx, t.res.Desired)
	if err != nil {
		return fmt.Errorf("observe node: %w", err)
	}
	t.observed = obs
	return nil
}

func (r *Reconciler) plan(ctx context.Context, t *tick) error {
	d := t.res.Desired
	cs, err := planner.Plan(d.Desired, t.observed, planner.Options{AllowEmpty: r.Config.AllowEmpty || t.hold})
	if err != nil {
		return err
	}
	t.res.Plan = cs
	if r.Diff {
		r.addDiffs(ctx, t)
	}
	t.res.Drift = drift.Detect(cs, r.now())
	if r.LogDrift {
		for _, d := range t.res.Drift {
			r.logger().WarnContext(ctx, "drift", keyDevice, r.Config.Device, keyResource, d.Resource, keyReason, d.Reason)
		}
	}
	acted := make(map[string]bool, len(cs.Actions))
	for _, a := range cs.Actions {
		acted[a.Resource] = true
	}
	for _, res := range d.Resources {
		t.res.Declared = append(t.res.Declared, res.ID)
		if m, ok := d.Specs[res.ID].(render.Model); ok {
			if t.res.Info == nil {
				t.res.Info = map[string]string{}
			}
			t.res.Info[res.ID] = m.Ref + " → " + m.Digest
			for _, b := range m.Bases {
				t.res.Info[res.ID] += ", base " + b
			}
		}
		if st := t.observed.Resources[res.ID]; st.Note != "" && !acted[res.ID] {
			if t.res.Notes == nil {
				t.res.Notes = map[string]string{}
			}
			t.res.Notes[res.ID] = st.Note
		}
	}
	return nil
}

// planTick plans; when the tick holds a release (see decide), it stops
// before applying unless every action reverts drift (see planReverts).
func (r *Reconciler) planTick(ctx context.Context, t *tick) error {
	if t.hold {
		return r.planReverts(ctx, t)
	}
	return r.plan(ctx, t)
}

func (r *Reconciler) applyPlan(ctx context.Context, t *tick) error {
	res, err := t.node.applier.Apply(ctx, t.res.Desired, t.res.Plan)
	t.res.Applied, t.res.Failed, t.res.RolledBack = res.Applied, res.Failed, res.RolledBack
	t.res.Downloaded, t.res.Skipped = res.Downloaded, res.Skipped
	if err == nil && !t.hold && t.res.Release != nil && !t.res.Release.FirstSeen.IsZero() {
		t.res.Release.Activated = true // the target's release, applied in full
	}
	if inv, ierr := t.node.applier.Inventory(); ierr == nil {
		t.res.AppliedRelease = inv.AppliedRelease()
	}
	return err
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}
