package render

import (
	"errors"
	"fmt"

	"github.com/tend-dev/tend/planner"
)

// Why a semver policy passes over a version, as
// tend_policy_skipped_total's reason label names them.
const (
	// SkipQuarantined: the version was rolled back on this node.
	SkipQuarantined = "quarantined"
	// SkipUnverified: the version does not carry the signatures verify
	// asks for.
	SkipUnverified = "unverified"
)

// SkipReasons are the reasons a policy passes over a version.
var SkipReasons = []string{SkipQuarantined, SkipUnverified}

// Skip is a version a model's semver policy passed over for the next
// highest matching tag.
type Skip struct {
	ID     string // model/NAME; set by Render
	Tag    string // the tag passed over
	Digest string // what it names
	Reason string // SkipQuarantined or SkipUnverified
	// Why says what the node knows of it: its quarantine (the wording of
	// Resolution.Quarantined), or the verification that failed.
	Why error
	// Took is the tag the policy resolved to instead; "" when none was
	// left (the model is held, or kept at its active version).
	Took string
}

// Error says which version was passed over and why: for a quarantined
// one Why as it is (it names the version and what to do), else
// "model/m: skipped 1.3.0 (sha256:ab12…): WHY", with "; resolved 1.2.1"
// when the policy took a version below it.
func (s Skip) Error() string {
	if s.Reason == SkipQuarantined {
		return s.Why.Error()
	}
	msg := fmt.Sprintf("%s: skipped %s (%s): %v", s.ID, s.Tag, planner.ShortDigest(s.Digest), s.Why)
	if s.Took != "" {
		msg += "; resolved " + s.Took
	}
	return msg
}

// Unwrap returns Why.
func (s Skip) Unwrap() error { return s.Why }

// unverified joins the skips of skips for want of a signature that the
// policy resolved past: the warning the status and logs show (a
// quarantined skip is in Quarantined, and one with nothing resolved is
// in Held).
func unverified(skips []Skip) error {
	var errs []error
	for _, s := range skips {
		if s.Reason == SkipUnverified && s.Took != "" {
			errs = append(errs, s)
		}
	}
	return errors.Join(errs...)
}
