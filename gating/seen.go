package gating

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/planner"
)

// releases is the content of statedir's releases.json: when this device
// first saw the release it is waiting for, so a restart does not reset a
// wave's after (commit → first seen).
type releases map[string]time.Time

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
func (t *tick) firstSeen(key string, now time.Time, record bool) (time.Time, error) {
	var seen releases
	if _, err := statedir.ReadJSON(statedir.Dir(t.Config.StateDir).Releases(), &seen); err != nil {
		if _, newer := errors.AsType[*statedir.NewerError](err); newer {
			return now, err // a newer tend's record is not written over
		}
		t.logger().Warn("forgetting when releases were first seen", keyReason, err.Error())
		seen = nil
	}
	if at, ok := seen[key]; ok && !at.After(now) {
		return at, nil
	} else if ok {
		// A clock set back (no time sync yet at boot) would hold the
		// release until a time that may be far off: seen now instead.
		t.logger().Warn("a release's first sight is in the future; counting from now", keyReason,
			fmt.Sprintf("first seen %s, now %s: check the node's clock", at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)))
	}
	if record {
		if err := statedir.WriteJSON(t.Config.StateDir, statedir.ReleasesFile, releases{key: now.UTC()}, 0o600); err != nil {
			return now, fmt.Errorf("record when release %s was first seen: %w", key, err)
		}
	}
	return now, nil
}

// see returns when this device first saw the release key of the target
// (see firstSeen), recording it when the tick applies, and says so in d:
// the agent measures every release, from its first sight to its
// activation (tend_release_convergence_seconds).
func (t *tick) see(d *Decision, key string, now time.Time) (time.Time, error) {
	seen, err := t.firstSeen(key, now, t.Record)
	if err != nil {
		return seen, err
	}
	if t.Record {
		d.Seen, d.FirstSeen = true, seen
	}
	return seen, nil
}
