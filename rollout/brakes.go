package rollout

import (
	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/manifest"
)

// BrakesQuery is the question a device of wave (> 0) of r asks the hub
// of r's brakes about the release key, seen at revision.
func BrakesQuery(r *manifest.Rollout, wave int, key api.ReleaseKey, revision string) api.VerdictQuery {
	b := r.Spec.Brakes
	return api.VerdictQuery{Release: key, Revision: revision, Rollout: r.Metadata.Name, Before: wave, Thresholds: api.Thresholds{
		MaxFailed: b.MaxFailed, MaxFailedPercent: b.MaxFailedPercent, MinApplied: b.MinApplied, Soak: b.Soak.D(),
	}}
}
