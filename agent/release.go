package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tend-dev/tend/agent/status"
	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
	"github.com/tend-dev/tend/rollout"
	"github.com/tend-dev/tend/source"
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

// decide, between render and observe, holds a release the device's
// Rollout says to wait for, or one that is still staging: the tick then
// reads and renders the last applied commit, with every model and image
// at its applied digest, instead, and its plan only reverts drift (see
// planReverts). A release is what the rendered target changes against
// what the inventory says was applied (not against the node: drift is no
// release): a commit that changes the device, or a model or image digest
// newly resolved by a tag or semver policy. The node is observed once,
// after the decision, whichever revision the tick takes. A device that
// has applied nothing takes its first commit at once (once staged).
//
// With a Stager (the agent's loop), a release whose models are not all in
// the store is staged in the background, as soon as the device sees it
// (even while its rollout holds it, unless the rollout says onRelease),
// and taken by the first tick that finds nothing left to download.
func (r *Reconciler) decide(ctx context.Context, t *tick) error {
	if t.hold {
		return nil // held already: the target's source is downloading
	}
	comp, snap := t.res.Composed, t.res.Snapshot
	stager := r.Stager
	if t.upTo != StepApply {
		stager = nil // plan and render stage nothing
	}
	if comp == nil || snap == nil || t.res.Desired == nil {
		return nil
	}
	inv, err := t.node.applier.Inventory()
	if err != nil {
		return err
	}
	target := targetRelease(inv, t.res.Desired)
	t.res.TargetRelease = target
	if comp.Rollout == nil && stager == nil {
		return nil
	}
	if comp.Rollout != nil {
		wave, _ := rollout.Wave(r.Config.Device, comp.Device.Metadata.Labels, comp.Rollout)
		t.res.Wave, t.res.Rollout = &wave, comp.Rollout.Metadata.Name
	}
	key := clockKey(t.res.Desired.Desired)
	need := toStage(t.res.Desired)
	if _, err := source.ParseRevision(inv.Revision); err != nil {
		// Nothing applied yet: the first commit is taken at once, once
		// staged; until then the tick has nothing to hold.
		if stager == nil {
			return nil
		}
		if _, err := r.seeRelease(t, key, r.now()); err != nil {
			return err
		}
		switch {
		case !need.empty():
			r.stage(ctx, t, stager, key, need)
			t.upTo = StepDecide
		default:
			stager.Forget(key) // taken now, or another target staging is superseded
		}
		return nil
	}
	release, err := t.release(inv)
	if err != nil {
		return err
	}
	if release.Empty() {
		if t.upTo == StepApply {
			t.res.Release = &status.SeenRelease{} // nothing waits
		}
		if stager != nil {
			stager.Forget("") // a staging of another target is superseded
		}
		return nil
	}
	d := rollout.Decision{Take: true}
	now := r.now()
	seen, err := r.seeRelease(t, key, now)
	if err != nil {
		return err
	}
	if comp.Rollout != nil {
		d = rollout.Decide(now, seen, r.Config.Device, comp.Device.Metadata.Labels, comp.Rollout)
		if d.Take && comp.Rollout.Spec.Brakes != nil && d.Wave > 0 {
			if why := r.askBrakes(ctx, comp.Rollout, d.Wave, api.ReleaseKey(target.Key), snap.Revision.String()); why != "" {
				d.Take, d.Cause, d.Reason = false, rollout.CauseBrakes, "held: brakes: "+why
			}
		}
		if d.Take && comp.Rollout.Spec.Gate != nil {
			if why := r.askGate(ctx, comp.Rollout.Spec.Gate.URL, d.Wave, snap.Revision.Commit); why != "" {
				d.Take, d.Cause, d.Reason = false, rollout.CauseGate, "held: "+why
			}
		}
	}
	if stager != nil {
		early := comp.Rollout == nil || comp.Rollout.Spec.Stage != manifest.StageOnRelease
		switch {
		case !need.empty() && (d.Take || early):
			r.stage(ctx, t, stager, key, need)
		case need.empty() && !d.Take:
			// Staged, or nothing to download, and held: its blobs stay
			// kept until it is taken.
			stager.Supersede(key)
			if st, ok := stager.Status(); ok {
				t.res.Staging = &st
			}
		default:
			stager.Forget(key) // taken now (its models keep their blobs), or not staged yet
		}
	}
	if d.Take && t.res.Staging == nil {
		return nil
	}
	if d.Take {
		r.logger().InfoContext(ctx, "release staging; the node keeps its applied revision and reverts drift to it",
			keyDevice, r.Config.Device, keyRevision, snap.Revision.String(), keyResources, strings.Join(released(release.Actions), ","))
	} else {
		t.res.Held = &HeldRelease{Revision: snap.Revision.String(), Resources: released(release.Actions),
			Cause: d.Cause, Reason: d.Reason, Wave: d.Wave, Opens: d.Opens, FirstSeen: seen}
		r.logger().InfoContext(ctx, "release held; the node keeps its applied revision and reverts drift to it",
			keyDevice, r.Config.Device, keyRevision, snap.Revision.String(), keyResources, strings.Join(t.res.Held.Resources, ","), keyReason, d.Reason)
	}
	return r.holdApplied(ctx, t)
}

// stage has stager stage the release key of the tick's target (need),
// and records how it goes in the result.
func (r *Reconciler) stage(_ context.Context, t *tick, stager *Stager, key string, need work) {
	st := stager.Stage(t.node, key, t.res.Snapshot.Revision.String(), need)
	t.res.Staging = &st
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

// targetRelease is the release of the tick's target d as the status
// reports it: its key against the inventory inv (applier.ReleaseOf), or,
// when d changes nothing there, the key of the release the node runs.
func targetRelease(inv *applier.Inventory, d *render.Desired) *status.Release {
	key := applier.ReleaseOf(inv, d)
	if key == "" {
		key = inv.AppliedRelease()
	}
	rel := &status.Release{Key: key.String(), Revision: d.Revision}
	for _, r := range d.Resources {
		switch s := d.Specs[r.ID].(type) {
		case render.Model:
			rel.Resources = append(rel.Resources, status.ReleaseResource{ID: r.ID, Ref: s.Ref, Tag: s.Tag, Digest: s.Digest})
		case render.Service:
			if s.Kind == render.KindContainer {
				rel.Resources = append(rel.Resources, status.ReleaseResource{ID: r.ID, Ref: s.Image, Tag: s.ImageTag, Digest: s.ImageDigest})
			}
		}
	}
	return rel
}

// clockKey names a release for its wave's clock by what it declares for
// this device, not by its commit: a later commit that does not change the
// device (resuming a paused rollout, a change for other devices) is the
// same release, and does not restart its wave's clock.
func clockKey(d planner.Desired) string {
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
// (see clockKey), now if never; with record, it keeps that in stateDir
// (forgetting older releases: only the one waiting matters).
func (r *Reconciler) firstSeen(key string, now time.Time, record bool) (time.Time, error) {
	var seen releases
	if _, err := statedir.ReadJSON(statedir.Dir(r.Config.StateDir).Releases(), &seen); err != nil {
		if _, newer := errors.AsType[*statedir.NewerError](err); newer {
			return now, err // a newer tend's record is not written over
		}
		r.logger().Warn("forgetting when releases were first seen", keyReason, err.Error())
		seen = nil
	}
	if at, ok := seen[key]; ok && !at.After(now) {
		return at, nil
	} else if ok {
		// A clock set back (no time sync yet at boot) would hold the
		// release until a time that may be far off: seen now instead.
		r.logger().Warn("a release's first sight is in the future; counting from now", keyReason,
			fmt.Sprintf("first seen %s, now %s: check the node's clock", at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)))
	}
	if record {
		if err := statedir.WriteJSON(r.Config.StateDir, statedir.ReleasesFile, releases{key: now.UTC()}, 0o600); err != nil {
			return now, fmt.Errorf("record when release %s was first seen: %w", key, err)
		}
	}
	return now, nil
}

// seeRelease returns when this device first saw the release key of the
// tick's target (see firstSeen), recording it, and the tick's Release,
// when the tick applies: the agent measures every release, from its
// first sight to its activation (tend_release_convergence_seconds).
func (r *Reconciler) seeRelease(t *tick, key string, now time.Time) (time.Time, error) {
	apply := t.upTo == StepApply
	seen, err := r.firstSeen(key, now, apply)
	if err != nil {
		return seen, err
	}
	if apply {
		t.res.Release = &status.SeenRelease{FirstSeen: seen}
	}
	return seen, nil
}

// gateTimeout bounds one question to a rollout's gate.
const gateTimeout = 10 * time.Second

// askGate asks a rollout's gate (raw, its URL) whether the device, of
// wave, takes commit: it returns "" to go, or why the release waits; it
// is asked again at the next tick. A gate that does not answer holds the
// release and is then left alone for a while (see serverDown.rests): the
// ticks in between hold it with the same reason without asking. A gate
// is known by the URL it is asked at, so a new commit asks at once.
func (r *Reconciler) askGate(ctx context.Context, raw string, wave int, commit string) string {
	u := gateURL(raw, r.Config.Device, wave, commit)
	why, _ := r.gateDown.ask(u, r.now, func(wait time.Duration) (string, bool) {
		return getGate(ctx, u, wait)
	})
	return why
}

// gateURL is a gate's URL raw with {revision} (the commit), {device} and
// {wave} filled in.
func gateURL(raw, device string, wave int, commit string) string {
	return strings.NewReplacer("{revision}", url.QueryEscape(commit), "{device}", url.QueryEscape(device),
		"{wave}", strconv.Itoa(wave)).Replace(raw)
}

// getGate GETs a gate's URL u, waiting no longer than wait: 200 means go,
// and it returns "". Any other answer, or none, says why the release
// waits. answered is false when the gate could not be reached or did not
// answer in time.
func getGate(ctx context.Context, u string, wait time.Duration) (why string, answered bool) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "gate " + source.RedactURL(u) + ": " + err.Error(), true
	}
	resp, err := gateClient.Do(req)
	if err != nil {
		var refused *gateRefusal
		if errors.As(err, &refused) {
			return "gate " + source.RedactURL(u) + ": " + refused.Error(), true
		}
		return "gate did not answer: " + source.RedactURL(u), false
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if err != nil {
		// A gate that stalls after its status line is one that does not
		// answer: left alone for the back-off, as one that hangs is.
		return "gate did not answer: " + source.RedactURL(u), false
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("gate answered %d", resp.StatusCode), true
	}
	return "", true
}

// gateClient asks gates: it follows a redirect only to the same scheme and
// host, and never connects to a link-local address (169.254.0.0/16,
// fe80::/10: a cloud's metadata service is no gate).
var gateClient = &http.Client{
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
			return &gateRefusal{fmt.Sprintf("redirected to another origin, %s://%s; a gate answers itself", req.URL.Scheme, req.URL.Host)}
		}
		if len(via) >= 10 {
			return &gateRefusal{"more than 10 redirects"}
		}
		return nil
	},
	Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{Timeout: gateTimeout, Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if ip := net.ParseIP(host); err == nil && ip != nil && (ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast()) {
				return &gateRefusal{fmt.Sprintf("%s is a link-local address; a gate may not be there", host)}
			}
			return nil
		}}).DialContext,
		TLSHandshakeTimeout: gateTimeout,
	},
}

// gateRefusal is a gate that tend refused to ask: it holds the release
// like a gate that says no.
type gateRefusal struct{ msg string }

func (e *gateRefusal) Error() string { return e.msg }
