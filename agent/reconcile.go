package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/drift"
	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci"
	"github.com/tend-dev/tend/planner"
)

// Log keys, so every line of every tick uses the same names.
const (
	keyDevice     = "device"
	keyRevision   = "revision"
	keyResult     = "result"
	keyDuration   = "duration"
	keyError      = "error"
	keyResource   = "resource"
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
)

// Results of a tick, as logs and metrics name them.
const (
	ResultSuccess = "success" // actions were applied
	ResultNoop    = "noop"    // nothing to do
	ResultError   = "error"
)

// Reconciler runs one reconcile for the device its config names.
type Reconciler struct {
	Config *manifest.AgentConfig
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// LockTimeout bounds the wait for another tend using the same stateDir;
	// zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// Supervisor runs services; nil starts them detached without watching
	// (a one-shot apply). The agent's loop sets a watching one.
	Supervisor *applier.Supervisor
}

// DefaultLockTimeout is how long a reconcile waits for another tend that
// holds the stateDir lock before giving up.
const DefaultLockTimeout = time.Minute

// Result is what one reconcile saw and did.
type Result struct {
	Snapshot *gitsource.Snapshot
	Device   *manifest.Device
	Plan     *planner.Changeset
	Drift    []drift.Event
	Applied  []planner.Action
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
	// FailedStep names the step that failed (open, fetch, render, observe,
	// plan, apply), "" when none did.
	FailedStep string
	// Declared lists the ids of the desired resources, once rendered.
	Declared []string
	// Notes holds what observers said of resources the plan leaves alone:
	// a service in a crash loop.
	Notes map[string]string
	// Info describes declared resources for status: a model's ref and the
	// digest it resolved to.
	Info map[string]string
}

// Outcome names the result for logs and metrics.
func (r *Result) Outcome(err error) string {
	switch {
	case err != nil:
		return ResultError
	case len(r.Applied) > 0:
		return ResultSuccess
	default:
		return ResultNoop
	}
}

// tick carries the state of one reconcile from step to step.
type tick struct {
	res      Result
	applier  *applier.Applier
	desired  planner.Desired
	observed planner.Observed
	apply    bool
}

type step struct {
	name string
	run  func(ctx context.Context, t *tick) error
}

// Plan fetches, renders, observes and plans, and changes nothing on the node.
func (r *Reconciler) Plan(ctx context.Context) (*Result, error) {
	return r.run(ctx, false)
}

// Apply reconciles once: it plans and then applies the plan.
func (r *Reconciler) Apply(ctx context.Context) (*Result, error) {
	return r.run(ctx, true)
}

func (r *Reconciler) run(ctx context.Context, apply bool) (*Result, error) {
	start := r.now()
	unlock, err := r.lock(ctx)
	if err != nil {
		return &Result{}, err
	}
	defer unlock()

	t := &tick{apply: apply, res: Result{Started: start}}
	steps := []step{
		{"open", r.open},
		{"fetch", r.fetch},
		{"render", r.render},
		{"observe", r.observe},
		{"plan", r.plan},
		{"apply", r.applyPlan},
	}
	for _, s := range steps {
		if err := s.run(ctx, t); err != nil {
			t.res.Duration = r.now().Sub(start)
			t.res.FailedStep = s.name
			return &t.res, err
		}
	}
	t.res.Duration = r.now().Sub(start)
	if snap := t.res.Snapshot; snap != nil && snap.Stale != nil {
		// The node was held at its last applied commit; the tick still
		// failed to use the target, and says why.
		t.res.FailedStep = "fetch"
		return &t.res, snap.Stale
	}
	if err := t.applier.Held(); err != nil {
		// Models whose registry could not be asked were held at their
		// active version; the rest converged.
		return &t.res, err
	}
	return &t.res, nil
}

// open makes the applier, whose inventory (read once) the source needs for
// its rewind check and the observer for what tend manages.
func (r *Reconciler) open(_ context.Context, t *tick) error {
	a, err := applier.New(applier.Config{Root: r.Config.Root, StateDir: r.Config.StateDir, AllowPaths: r.Config.AllowPaths,
		Models: ModelOptions(r.Config), Supervisor: r.Supervisor, Logger: r.logger()})
	if err != nil {
		return err
	}
	t.applier = a
	return nil
}

func (r *Reconciler) fetch(ctx context.Context, t *tick) error {
	inv, err := t.applier.Inventory()
	if err != nil {
		return err
	}
	snap, err := fetch(ctx, r.Config, inv, r.logger())
	if err != nil {
		return err
	}
	t.res.Snapshot = snap
	return nil
}

func (r *Reconciler) render(_ context.Context, t *tick) error {
	dev, err := Render(r.Config, t.res.Snapshot, true)
	if err != nil {
		return err
	}
	t.res.Device = dev
	return nil
}

func (r *Reconciler) observe(ctx context.Context, t *tick) error {
	a := t.applier
	var err error
	t.desired, err = a.Desired(ctx, t.res.Device, Revision(t.res.Snapshot))
	if err != nil {
		return err
	}
	t.observed, err = a.Observe(ctx, t.desired)
	if err != nil {
		return fmt.Errorf("observe node: %w", err)
	}
	return nil
}

func (r *Reconciler) plan(_ context.Context, t *tick) error {
	cs, err := planner.Plan(t.desired, t.observed, planner.Options{AllowEmpty: r.Config.AllowEmpty})
	if err != nil {
		return err
	}
	t.res.Plan = cs
	t.res.Drift = drift.Detect(cs, r.now())
	acted := make(map[string]bool, len(cs.Actions))
	for _, a := range cs.Actions {
		acted[a.Resource] = true
	}
	refs := map[string]string{}
	if dev := t.res.Device; dev != nil {
		for _, m := range dev.Spec.Models {
			refs[applier.ModelID(m.Name)] = m.Ref
		}
	}
	for _, d := range t.desired.Resources {
		t.res.Declared = append(t.res.Declared, d.ID)
		if ref, ok := refs[d.ID]; ok && len(d.Fields) > 0 {
			if t.res.Info == nil {
				t.res.Info = map[string]string{}
			}
			t.res.Info[d.ID] = ref + " → " + d.Fields[0].Value
		}
		if st := t.observed.Resources[d.ID]; st.Note != "" && !acted[d.ID] {
			if t.res.Notes == nil {
				t.res.Notes = map[string]string{}
			}
			t.res.Notes[d.ID] = st.Note
		}
	}
	return nil
}

func (r *Reconciler) applyPlan(ctx context.Context, t *tick) error {
	if !t.apply {
		return nil
	}
	before := ""
	if inv, ierr := t.applier.Inventory(); ierr == nil {
		before = inv.Revision
	}
	res, err := t.applier.Apply(ctx, t.desired, t.res.Plan)
	t.res.Applied, t.res.Failed, t.res.RolledBack = res.Applied, res.Failed, res.RolledBack
	t.res.Downloaded = res.Downloaded
	var rb *applier.RollbackError
	// Only a new commit is quarantined: when the commit already applied
	// fails (a moved tag, a restart after drift), holding it would hold
	// nothing; the loop's backoff spaces the retries instead.
	if errors.As(err, &rb) && t.res.Snapshot != nil && !strings.HasSuffix(before, "@sha1:"+t.res.Snapshot.Revision) {
		// This commit broke a service: never apply it again here.
		q := applier.Quarantined{Revision: rb.Revision, Reason: rb.Error(), At: r.now().UTC()}
		if qerr := applier.Quarantine(r.Config.StateDir, t.res.Snapshot.Revision, q); qerr != nil {
			err = errors.Join(err, fmt.Errorf("record rolled-back commit: %w", qerr))
		}
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

// Desired fetches and renders this device's desired state without looking
// at the node. With confine, files and models must lie under allowPaths.
func (r *Reconciler) Desired(ctx context.Context, confine bool) (*gitsource.Snapshot, *manifest.Device, error) {
	snap, err := r.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	dev, err := Render(r.Config, snap, confine)
	return snap, dev, err
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
	ref, path, err := c.ExpandSource()
	if err != nil {
		return nil, err
	}
	last := lastApplied(inv, ref)
	src := gitsource.Source{URL: c.Source.URL, Ref: ref, Path: path, LastApplied: last, AllowRewind: c.Source.AllowRewind}
	if q, err := applier.LoadQuarantine(c.StateDir); err != nil {
		return nil, err
	} else if len(q) > 0 {
		src.Quarantined = make(map[string]string, len(q))
		for commit, e := range q {
			src.Quarantined[commit] = e.Reason
		}
	}
	if a := c.Source.Auth; a != nil {
		src.Auth = gitsource.Auth{TokenFile: a.TokenFile, UsernameFile: a.UsernameFile, PasswordFile: a.PasswordFile,
			CAFile: a.CAFile, SSHKeyFile: a.SSHKeyFile, KnownHostsFile: a.KnownHostsFile, InsecureIgnoreHostKey: a.InsecureIgnoreHostKey}
	}
	if v := c.Source.Verify; v != nil {
		src.Keyring = v.Keyring
	}
	ctx, cancel := context.WithTimeout(ctx, c.Source.Timeout.D())
	defer cancel()
	snap, err := gitsource.Fetch(ctx, src, gitsource.Options{Dir: GitDir(c.StateDir), Logger: log})
	explain := func(err error) error {
		if errors.Is(err, gitsource.ErrPathNotFound) {
			return fmt.Errorf("no manifests for device %s at %s in %s@%s: %w", c.Device, displayPath(path), gitsource.RedactURL(c.Source.URL), displayRef(ref), err)
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

// Render turns a snapshot into this device's validated desired state. With
// confine, files and models must lie under allowPaths.
func Render(c *manifest.AgentConfig, snap *gitsource.Snapshot, confine bool) (*manifest.Device, error) {
	inputs := make([]manifest.Input, len(snap.Files))
	for i, f := range snap.Files {
		inputs[i] = manifest.Input{Name: f.Path, Data: f.Data}
	}
	dev, err := manifest.Load(c.Device, inputs)
	if err == nil {
		err = dev.Validate(manifest.ValidateOptions{AllowPaths: c.AllowPaths, CheckAllowPaths: confine || len(c.AllowPaths) > 0})
	}
	if err != nil {
		return nil, fmt.Errorf("invalid manifests for device %s at %s:\n%w", c.Device, Revision(snap), err)
	}
	return dev, nil
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

// ModelOptions are the applier's model options from the agent config.
func ModelOptions(c *manifest.AgentConfig) applier.ModelOptions {
	o := applier.ModelOptions{
		Registry:       oci.Options{Insecure: c.Registries.Insecure, Keychain: oci.Keychain(c.Registries.DockerConfig)},
		VerifyInterval: c.Models.VerifyInterval.D(),
		Parallel:       c.Models.Parallel,
		KeepVersions:   manifest.DefaultKeepVersions,
	}
	if c.Models.KeepVersions != nil {
		o.KeepVersions = *c.Models.KeepVersions
	}
	return o
}

// GitDir is where the persistent clone of the fleet repo lives.
func GitDir(stateDir string) string { return stateDir + "/git" }

func displayPath(p string) string {
	if p == "" || p == "." {
		return "the repo root"
	}
	return p
}
