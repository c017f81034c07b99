package gating

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
	"github.com/tend-dev/tend/rollout"
	"github.com/tend-dev/tend/source"
)

// Decider decides, tick by tick, whether the device takes the release
// its rendered target makes (see Decide). It keeps what outlives a tick:
// the brakes' hub and the rollout's gate that did not answer, left alone
// for a back-off. The zero Decider is ready; the agent's Reconciler
// keeps one.
type Decider struct {
	brakesDown serverDown // the brakes' hub that did not answer, left alone a while
	gateDown   serverDown // the rollout's gate that did not answer, left alone a while

	// HubTimeout and GateTimeout bound one question to the brakes' hub
	// and to the rollout's gate; zero means 10 s. Set while no tick runs.
	HubTimeout, GateTimeout time.Duration
}

// Input is what a tick knows when it decides: the target it rendered and
// what the node applied.
type Input struct {
	// Config is the agent's: the device, its labels, root and stateDir,
	// maxLockWait, and report (whose token the brakes' hub is asked with).
	Config *manifest.AgentConfig
	// Composed, Snapshot and Desired are the tick's target, composed,
	// fetched and rendered; Inventory is what the node applied.
	Composed  *manifest.Composed
	Snapshot  *source.Snapshot
	Desired   *render.Desired
	Inventory *applier.Inventory
	// Applied reads the applied commit from the node's copy of the
	// source, with no remote (the fleet's source.Fetcher): its update
	// locks are those a release waits for.
	Applied AppliedReader
	// Record keeps when the release was first seen, and since when an
	// update lock holds it, in stateDir: the tick applies. A plan reads
	// them and writes nothing.
	Record bool
	// Stages says the tick stages releases in the background (the
	// agent's loop, applying); Download, that activating the target
	// downloads something (a model version not in the store, an image
	// the engine does not have).
	Stages, Download bool
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// AppliedReader reads rev, the revision the node applied, from the copy
// kept on the node, with no network (source.Fetcher's Applied).
type AppliedReader interface {
	Applied(ctx context.Context, rev source.Revision, paths []source.Path) (*source.Snapshot, error)
}

// Verdict is what a tick does with its target's release.
type Verdict int

const (
	// Take the target: it makes no release, or the release may go.
	Take Verdict = iota
	// Hold the applied revision: the rollout, its brakes, its gate or an
	// update lock holds the release (Decision.Held says why). The tick
	// reads and renders the applied revision instead, and reverts drift.
	Hold
	// Stage the release, which goes once nothing is left to download:
	// meanwhile the tick holds the applied revision as for Hold, or,
	// before anything was applied (Decision.First), stops.
	Stage
)

// StagerAction is what the tick tells its stager (see Decision.Stager).
type StagerAction int

const (
	// LeaveStager: the tick stages nothing (a plan; no stager).
	LeaveStager StagerAction = iota
	// StartStaging stages the release Decision.StageKey, superseding any
	// other, or goes on staging it.
	StartStaging
	// KeepStaged keeps what the release StageKey staged (it is held,
	// with nothing left to download) and supersedes any other staging.
	KeepStaged
	// ForgetStaging drops any staging but StageKey's ("" drops any): the
	// release is taken, needs nothing, or waits for its rollout to stage.
	ForgetStaging
)

// Held says why a tick did not take a release (see rollout.Decide): the
// node kept its applied revision and only reverted drift to it.
type Held struct {
	Revision string // the release held, ref@sha1:commit
	// Resources are what the release changes (not drift reverts), by id:
	// with the applied commit, the models whose tag or semver policy
	// resolved to a new digest.
	Resources []string
	Cause     string    // one of rollout.Causes
	Reason    string    // held: rollout wave 2 opens 2026-12-03T14:00Z
	Wave      int       // the device's wave, or rollout.NoWave
	Opens     time.Time // when the wave or window opens; zero if not known
	FirstSeen time.Time // when this device first saw the release
}

// Decision is what Decide says of a tick's target, with what the
// status and the metrics need.
type Decision struct {
	Verdict Verdict
	// Held says why, with Verdict Hold.
	Held *Held
	// Until is when an update lock stops holding the release (maxLockWait
	// is over), with Held.Cause rollout.CauseLock.
	Until time.Time
	// First says the node applied nothing yet: a first commit is taken at
	// once, once staged, and a Stage holds nothing.
	First bool
	// Resources are what the release changes, drift reverts left out, by
	// id (with Verdict Stage or Hold).
	Resources []string
	// Stager and StageKey are what the tick tells its stager, when it
	// stages (Input.Stages): StageKey names the release (by what the
	// target declares, see clockKey).
	Stager   StagerAction
	StageKey string
	// Release is the key of the target's release against the inventory
	// (applier.ReleaseOf), or, when the target changes nothing there, the
	// key of the release the node runs.
	Release api.ReleaseKey
	// Wave is the device's wave in the target's Rollout (rollout.NoWave:
	// none takes it) and Rollout its name; nil and "" without a rollout.
	Wave    *int
	Rollout string
	// Seen says the tick measured the release from its first sight to its
	// activation (it applies, with a stager or a rollout): FirstSeen is
	// when this device first saw it, zero when the target makes no
	// release.
	Seen      bool
	FirstSeen time.Time

	device, revision string // for Log
}

// Decide says whether the tick takes its rendered target, holds the
// applied revision, or stages the target's release first. A release is
// what the target changes against what the inventory says was applied
// (not against the node: drift is no release): a commit that changes the
// device, or a model or image digest newly resolved by a tag or semver
// policy. A device that has applied nothing takes its first commit at
// once (once staged).
//
// Under a Rollout the release waits for the rollout (rollout.Decide:
// paused, the device's wave, the window), then for its brakes' hub (a
// device of wave k > 0) and for its gate. A release let through, or taken
// at once without a rollout, then waits while it would stop or restart a
// service whose update lock a process holds (see holdForLocks).
//
// When the tick stages (Input.Stages), a release with something to
// download is staged as soon as the device sees it (even while its
// rollout holds it, unless the rollout says onRelease), and taken by the
// first tick that finds nothing left to download.
//
// On an error the Decision still says what was learnt before it (the
// release's key, the wave, the first sight): the tick reports them.
func (g *Decider) Decide(ctx context.Context, in Input) (Decision, error) {
	d := Decision{Verdict: Take, device: in.Config.Device, revision: in.Snapshot.Revision.String()}
	d.Release = applier.ReleaseOf(in.Inventory, in.Desired)
	if d.Release == "" {
		d.Release = in.Inventory.AppliedRelease()
	}
	t := &tick{Input: in}
	if err := g.decide(ctx, t, &d); err != nil || d.Verdict != Take {
		return d, err
	}
	return d, g.holdForLocks(ctx, t, &d)
}

// tick is one Decide: its input, and the release planned once.
type tick struct {
	Input
	released *planner.Changeset // see release
}

// release is what the target changes against what the inventory says
// was applied, planned once a Decide: the rollout and the update locks
// both ask.
func (t *tick) release() (*planner.Changeset, error) {
	if t.released == nil {
		cs, err := planner.Plan(t.Desired.Desired, asApplied(t.Inventory), planner.Options{AllowEmpty: true})
		if err != nil {
			return nil, err
		}
		t.released = cs
	}
	return t.released, nil
}

func (t *tick) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func (t *tick) logger() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// decide is the rollout's part of Decide: the wave, window and pause, the
// brakes and the gate, and what the stager does.
func (g *Decider) decide(ctx context.Context, t *tick, d *Decision) error {
	comp, snap := t.Composed, t.Snapshot
	if comp.Rollout == nil && !t.Stages {
		return nil
	}
	if comp.Rollout != nil {
		wave, _ := rollout.Wave(t.Config.Device, comp.Device.Metadata.Labels, comp.Rollout)
		d.Wave, d.Rollout = &wave, comp.Rollout.Metadata.Name
	}
	key := clockKey(t.Desired.Desired)
	if _, err := source.ParseRevision(t.Inventory.Revision); err != nil {
		// Nothing applied yet: the first commit is taken at once, once
		// staged; until then the tick has nothing to hold.
		if !t.Stages {
			return nil
		}
		if _, err := t.see(d, key, t.now()); err != nil {
			return err
		}
		d.First, d.StageKey = true, key
		if t.Download {
			d.Verdict, d.Stager = Stage, StartStaging
		} else {
			d.Stager = ForgetStaging // taken now, or another target staging is superseded
		}
		return nil
	}
	release, err := t.release()
	if err != nil {
		return err
	}
	if release.Empty() {
		d.Seen = t.Record // nothing waits
		if t.Stages {
			d.Stager = ForgetStaging // a staging of another target is superseded
		}
		return nil
	}
	rd := rollout.Decision{Take: true}
	now := t.now()
	seen, err := t.see(d, key, now)
	if err != nil {
		return err
	}
	if comp.Rollout != nil {
		rd = rollout.Decide(now, seen, t.Config.Device, comp.Device.Metadata.Labels, comp.Rollout)
		if rd.Take && comp.Rollout.Spec.Brakes != nil && rd.Wave > 0 {
			if why := g.askBrakes(ctx, t, comp.Rollout, rd.Wave, d.Release, snap.Revision.String()); why != "" {
				rd.Take, rd.Cause, rd.Reason = false, rollout.CauseBrakes, "held: brakes: "+why
			}
		}
		if rd.Take && comp.Rollout.Spec.Gate != nil {
			if why := g.askGate(ctx, t, comp.Rollout.Spec.Gate.URL, rd.Wave, snap.Revision.Commit); why != "" {
				rd.Take, rd.Cause, rd.Reason = false, rollout.CauseGate, "held: "+why
			}
		}
	}
	if t.Stages {
		early := comp.Rollout == nil || comp.Rollout.Spec.Stage != manifest.StageOnRelease
		d.StageKey = key
		switch {
		case t.Download && (rd.Take || early):
			d.Stager = StartStaging
		case !t.Download && !rd.Take:
			// Staged, or nothing to download, and held: its blobs stay
			// kept until it is taken.
			d.Stager = KeepStaged
		default:
			d.Stager = ForgetStaging // taken now (its models keep their blobs), or not staged yet
		}
	}
	if rd.Take && d.Stager != StartStaging {
		return nil
	}
	d.Resources = released(release.Actions)
	if rd.Take {
		d.Verdict = Stage
		return nil
	}
	d.Verdict = Hold
	d.Held = &Held{Revision: snap.Revision.String(), Resources: d.Resources,
		Cause: rd.Cause, Reason: rd.Reason, Wave: rd.Wave, Opens: rd.Opens, FirstSeen: seen}
	return nil
}

// Log writes the line that says what the tick does with a release it does
// not take: it stages it, or it holds it. The tick logs it once it told
// its stager (see Decision.Stager).
func (d Decision) Log(ctx context.Context, log *slog.Logger) {
	switch {
	case d.Verdict == Stage && !d.First:
		log.InfoContext(ctx, "release staging; the node keeps its applied revision and reverts drift to it",
			keyDevice, d.device, keyRevision, d.revision, keyResources, strings.Join(d.Resources, ","))
	case d.Verdict == Hold && d.Held.Cause == rollout.CauseLock:
		log.InfoContext(ctx, "release held by an update lock; the node keeps its applied revision and reverts drift to it",
			keyDevice, d.device, keyRevision, d.revision, keyResources, strings.Join(d.Held.Resources, ","), keyReason, d.Held.Reason,
			"until", d.Until.UTC().Format(time.RFC3339))
	case d.Verdict == Hold:
		log.InfoContext(ctx, "release held; the node keeps its applied revision and reverts drift to it",
			keyDevice, d.device, keyRevision, d.revision, keyResources, strings.Join(d.Held.Resources, ","), keyReason, d.Held.Reason)
	}
}

// asApplied is the node as the inventory says tend left it: every managed
// resource with the fields it was applied with. Planned against it, a
// desired state gives the changes of a release, without drift.
func asApplied(inv *applier.Inventory) planner.Observed {
	obs := planner.Observed{Resources: make(map[string]planner.State, len(inv.Resources)), Applied: inv.Applied(), Created: inv.Created()}
	for id, fields := range obs.Applied {
		obs.Resources[id] = planner.State{Exists: true, Fields: fields}
	}
	return obs
}

// released lists the resources a plan's actions change, drift reverts
// left out, in plan order.
func released(actions []planner.Action) []string {
	var ids []string
	for _, a := range actions {
		if !a.OnlyDrift() && !slices.Contains(ids, a.Resource) {
			ids = append(ids, a.Resource)
		}
	}
	return ids
}
