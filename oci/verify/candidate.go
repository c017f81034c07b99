package verify

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/manifest"
)

// RecheckUnsigned is how long VerifyCandidate and Recheck take a digest
// found unsigned to stay so before they ask the registry again.
const RecheckUnsigned = 10 * time.Minute

// RecheckBackoff is how long Recheck leaves a running version alone
// after its n-th failure in a row to look its signatures up: 1 minute,
// doubling to 5.
var RecheckBackoff = backoff.Exponential{Initial: time.Minute, Max: 5 * time.Minute}

// failure is a failed verification VerifyCandidate or Recheck
// remembers: a digest found unsigned, or (Recheck's) signatures that
// could not be looked up.
type failure struct {
	at  time.Time
	err error
	// lookups counts the failures in a row to look the signatures up;
	// 0 for a digest found unsigned.
	lookups int
}

// rests reports whether f's target is left alone at now: for
// RecheckUnsigned after it was found unsigned, for RecheckBackoff after
// a look-up failed. A clock set back before f has it asked at once.
func (f failure) rests(now time.Time) bool {
	wait := RecheckUnsigned
	if f.lookups > 0 {
		wait = RecheckBackoff.Delay(f.lookups)
	}
	return !now.Before(f.at) && now.Sub(f.at) < wait
}

// VerifyCandidate is Verify for a version a policy passes over when it
// is not signed (for the next highest one): a digest found unsigned (an
// *Error) is remembered for RecheckUnsigned, and that error returned
// again without asking the registry (nor counting in Observe) until then,
// so that a device running an older version does not ask every tick for
// the signatures of a newer one nobody signed. A failure to look the
// signatures up is not remembered.
func (v *Verifier) VerifyCandidate(ctx context.Context, t Target, reqs []*manifest.ArtifactVerify) error {
	return v.verifyRemembering(ctx, t, reqs, false)
}

// Recheck is VerifyCandidate for the version a node runs, checked again
// under the requirements asked for now (see ActiveWarning). It asks the
// registry only when the requirements changed since the version was last
// checked (their fields, or the content of their files): a version
// verified under them is remembered, one found unsigned is asked of
// again after RecheckUnsigned, and one whose signatures could not be
// looked up (a registry unreachable, which a digest already in the store
// does not otherwise reveal) after RecheckBackoff, its error returned
// until then, so that an air-gapped device does not wait on a registry
// for each running version at each tick.
func (v *Verifier) Recheck(ctx context.Context, t Target, reqs []*manifest.ArtifactVerify) error {
	return v.verifyRemembering(ctx, t, reqs, true)
}

// verifyRemembering is VerifyCandidate, and with lookups set Recheck.
func (v *Verifier) verifyRemembering(ctx context.Context, t Target, reqs []*manifest.ArtifactVerify, lookups bool) error {
	all, keys, err := v.requirements(t, reqs)
	if err != nil || len(keys) == 0 {
		return err
	}
	k := t.ID + "\n" + strings.Join(keys, "\n")
	v.mu.Lock()
	f, ok := v.failed[k]
	v.mu.Unlock()
	if ok && (f.lookups == 0 || lookups) && f.rests(v.now()) {
		return f.err
	}
	err = v.verifyKeyed(ctx, t, all, keys)
	if errors.Is(ctx.Err(), context.Canceled) {
		return err // stopped, not failed: nothing learnt
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case errors.Is(err, ErrUnsigned):
		v.fail(k, failure{at: v.now(), err: err})
	case err != nil && lookups:
		n := 1
		if ok && f.lookups > 0 {
			n = f.lookups + 1
		}
		v.fail(k, failure{at: v.now(), err: err, lookups: n})
	default:
		delete(v.failed, k)
	}
	return err
}

// fail remembers f by k; v.mu is held.
func (v *Verifier) fail(k string, f failure) {
	if _, ok := v.failed[k]; !ok && (v.failed == nil || len(v.failed) >= maxRemembered) {
		v.failed = map[string]failure{}
	}
	v.failed[k] = f
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}
