package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/rollout"
)

// HeldRelease says why a tick did not take a release (see rollout.Decide):
// the node kept its applied revision and only reverted drift to it.
type HeldRelease struct {
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

// releases is the content of statedir's releases.json: when this device
// first saw the release it is waiting for, so a restart does not reset a
// wave's after (commit → first seen).
type releases map[string]time.Time

// decideRelease, after the target is planned, holds a release the
// device's Rollout says to wait for: the tick then renders, plans and
// applies the last applied commit, with every model at its applied digest,
// instead, reverting drift only (as Hold does). A release is a plan that
// does more than revert drift: a commit that changes the device, or a
// model digest newly resolved by a tag or semver policy at the applied
// commit. Drift reverts are never held, and a device that has applied
// nothing takes its first commit at once.
func (r *Reconciler) decideRelease(ctx context.Context, t *tick) error {
	comp, snap := t.res.Composed, t.res.Snapshot
	if t.hold || comp == nil || comp.Rollout == nil || snap == nil || t.res.Plan.Empty() || onlyReverts(t.res.Plan.Actions) {
		return nil
	}
	inv, err := t.node.applier.Inventory()
	if err != nil {
		return err
	}
	_, applied, ok := strings.Cut(inv.Revision, "@sha1:")
	if !ok || len(applied) != 40 {
		return nil
	}
	now := r.now()
	seen, err := r.firstSeen(releaseKey(t.res.Desired.Desired), now, t.upTo == StepApply)
	if err != nil {
		return err
	}
	d := rollout.Decide(now, seen, r.Config.Device, comp.Device.Metadata.Labels, comp.Rollout)
	if d.Take && comp.Rollout.Spec.Gate != nil {
		if why := askGate(ctx, comp.Rollout.Spec.Gate.URL, r.Config.Device, d.Wave, snap.Revision); why != "" {
			d.Take, d.Cause, d.Reason = false, rollout.CauseGate, "held: "+why
		}
	}
	if d.Take {
		return nil
	}
	t.res.Held = &HeldRelease{Revision: Revision(snap), Resources: released(t.res.Plan.Actions),
		Cause: d.Cause, Reason: d.Reason, Wave: d.Wave, Opens: d.Opens, FirstSeen: seen}
	r.logger().InfoContext(ctx, "release held; the node keeps its applied revision and reverts drift to it",
		keyDevice, r.Config.Device, keyRevision, Revision(snap), keyResources, strings.Join(t.res.Held.Resources, ","), keyReason, d.Reason)
	t.hold = true
	for _, run := range []func(context.Context, *tick) error{r.fetchApplied, r.renderApplied, r.observe, r.planReverts} {
		if err := run(ctx, t); err != nil {
			return err
		}
	}
	return nil
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

// releaseKey names a release by what it declares for this device, not by
// its commit: a later commit that does not change the device (resuming a
// paused rollout, a change for other devices) is the same release, and
// does not restart its wave's clock.
func releaseKey(d planner.Desired) string {
	h := sha256.New()
	for _, res := range d.Resources {
		fmt.Fprintf(h, "%q\n", res.ID)
		for _, f := range res.Fields {
			fmt.Fprintf(h, "%q=%q\n", f.Name, f.Value)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// firstSeen returns when this device first saw the release named key
// (see releaseKey), now if never; with record, it keeps that in stateDir
// (forgetting older releases: only the one waiting matters).
func (r *Reconciler) firstSeen(key string, now time.Time, record bool) (time.Time, error) {
	var seen releases
	if _, err := atomicfile.ReadJSON(statedir.Dir(r.Config.StateDir).Releases(), &seen); err != nil {
		r.logger().Warn("forgetting when releases were first seen", keyReason, err.Error())
		seen = nil
	}
	if at, ok := seen[key]; ok {
		return at, nil
	}
	if record {
		if err := atomicfile.WriteJSON(r.Config.StateDir, statedir.ReleasesFile, releases{key: now.UTC()}, 0o600); err != nil {
			return now, fmt.Errorf("record when release %s was first seen: %w", key, err)
		}
	}
	return now, nil
}

// gateTimeout bounds one question to a rollout's gate.
const gateTimeout = 10 * time.Second

// askGate GETs a rollout's gate URL, with {revision} (the commit),
// {device} and {wave} filled in: 200 means go, and it returns "". Any
// other answer, or none, says why the release waits; it is asked again
// at the next tick.
func askGate(ctx context.Context, raw, device string, wave int, commit string) string {
	u := strings.NewReplacer("{revision}", url.QueryEscape(commit), "{device}", url.QueryEscape(device),
		"{wave}", strconv.Itoa(wave)).Replace(raw)
	ctx, cancel := context.WithTimeout(ctx, gateTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "gate " + gitsource.RedactURL(u) + ": " + err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "gate did not answer: " + gitsource.RedactURL(u)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("gate answered %d", resp.StatusCode)
	}
	return ""
}
