package hub

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/internal/printable"
)

// Bounds of the release resources a report may send: what the hub stores
// of them per release.
const (
	maxReleaseResources = 1024
	maxResourceIDBytes  = 256
	maxResourceRefBytes = 2048
	maxResourceTagBytes = 256
	maxDigestBytes      = 256
	// maxDetailBytes bounds the reason of a failure kept per device and
	// release.
	maxDetailBytes = 1024
)

// keys are the releases a status document names, by key: the one the
// device works towards (or runs, when none waits), the one it runs, and
// those rolled back on it.
type keys struct {
	target api.ReleaseKey
	// targetRevision is the revision the target release is at.
	targetRevision string
	applied        api.ReleaseKey // "" before the device's first apply
	// appliedCommit is commit:HASH of the revision the device runs ("" when
	// it is none of REF@sha1:HASH). It runs that commit's release even
	// when its applied release is another, the commit having changed
	// nothing on it: a commit that changed only later-wave devices is
	// their commit:HASH, and this device ran it.
	appliedCommit api.ReleaseKey
	// resources are the target's models and images as the device
	// resolved them; nil from a tend that sends none (v0.1.0).
	resources []api.ReleaseResource
	// declared are the ids of the models and services its target
	// declares, as resourceIDs gives them.
	declared string
	// quarantined are the device's quarantine entries by the part of a
	// key each stands for: a commit's hash, or "ID@sha256:HEX".
	quarantined map[string]*api.Quarantined
	// rolledBack lists those parts in the order of the status.
	rolledBack []string
}

// keysOf reads the release keys of s. A report of tend v0.1.0 names none:
// its target release is then its target revision's commit, and the one
// it runs its applied revision's (api.RevisionRelease). Its errors say
// which field of the report is wrong.
func keysOf(s *api.Status) (keys, error) {
	k := keys{targetRevision: target(s), quarantined: map[string]*api.Quarantined{}}
	if s.AppliedRelease != "" {
		key, err := api.ParseReleaseKey(s.AppliedRelease)
		if err != nil {
			return k, fmt.Errorf("appliedRelease: %w", err)
		}
		k.applied = key
	} else if s.AppliedRevision != "" {
		k.applied = api.RevisionRelease(s.AppliedRevision)
	}
	if c, err := api.ParseReleaseKey(string(api.RevisionRelease(s.AppliedRevision))); err == nil {
		if _, commit := c.Commit(); commit {
			k.appliedCommit = c
		}
	}
	switch r := s.Release; {
	case r != nil && r.Key != "":
		key, err := api.ParseReleaseKey(r.Key)
		if err != nil {
			return k, fmt.Errorf("release.key: %w", err)
		}
		k.target = key
		if r.Revision != "" {
			k.targetRevision = r.Revision
		}
		if err := checkResources(r.Resources); err != nil {
			return k, err
		}
		k.resources = r.Resources
		if k.resources == nil {
			k.resources = []api.ReleaseResource{}
		}
	case s.AppliedRelease != "" && (s.TargetRevision == "" || s.TargetRevision == s.AppliedRevision):
		// A tend that sends keys, before a tick rendered its target:
		// nothing waits.
		k.target = k.applied
	default:
		k.target = api.RevisionRelease(k.targetRevision)
	}
	for _, key := range []api.ReleaseKey{k.target, k.applied} {
		if len(key) > api.MaxReleaseKeyBytes {
			return k, fmt.Errorf("revision of %d bytes, more than %d: a revision is REF@sha1:COMMIT", len(key), api.MaxReleaseKeyBytes)
		}
	}
	for i := range s.Quarantined {
		q := &s.Quarantined[i]
		key := quarantineKey(q)
		if len(key) > api.MaxReleaseKeyBytes {
			return k, fmt.Errorf("quarantined[%d].release of %d bytes, more than %d: use REF@sha1:COMMIT, model/NAME@sha256:HEX or service/NAME@sha256:HEX", i, len(key), api.MaxReleaseKeyBytes)
		}
		for _, p := range key.Parts() {
			if _, dup := k.quarantined[p]; !dup {
				k.quarantined[p] = q
				k.rolledBack = append(k.rolledBack, p)
			}
		}
	}
	k.declared = declaredIDs(s, k.resources)
	return k, nil
}

// quarantineKey is the key of the release a quarantine entry rolled back
// as far as the entry tells: commit:HASH for a commit (REF@sha1:HASH), or
// the digest's part of a key, "model/NAME@sha256:HEX".
func quarantineKey(q *api.Quarantined) api.ReleaseKey { return api.RevisionRelease(q.Release) }

// checkResources bounds the release resources of a report.
func checkResources(rs []api.ReleaseResource) error {
	if len(rs) > maxReleaseResources {
		return fmt.Errorf("release.resources lists %d resources, more than %d", len(rs), maxReleaseResources)
	}
	for i, r := range rs {
		for _, f := range []struct {
			name, value string
			max         int
		}{{"id", r.ID, maxResourceIDBytes}, {"ref", r.Ref, maxResourceRefBytes}, {"tag", r.Tag, maxResourceTagBytes}, {"digest", r.Digest, maxDigestBytes}} {
			if len(f.value) > f.max {
				return fmt.Errorf("release.resources[%d].%s of %d bytes, more than %d", i, f.name, len(f.value), f.max)
			}
		}
		if strings.ContainsAny(r.ID, " \t\n") {
			return fmt.Errorf("release.resources[%d].id %q: a resource id has no spaces (model/NAME, service/NAME)", i, r.ID)
		}
	}
	return nil
}

// ranOnly reports whether key is the commit the device runs and not the
// release it took: a commit that changed nothing on it. Its part in that
// commit is applied, but the commit is no release of the device's.
func (k keys) ranOnly(key api.ReleaseKey) bool {
	return key == k.appliedCommit && key != k.applied && key != k.target
}

// failedBy is the quarantine entry of a part of key on the device, or
// nil when none of key's parts was rolled back there.
func (k keys) failedBy(key api.ReleaseKey) *api.Quarantined {
	for _, p := range key.Parts() {
		if q := k.quarantined[p]; q != nil {
			return q
		}
	}
	return nil
}

// resourcesJSON is the target's resources as the releases table keeps
// them; "[]" when the report sent none.
func (k keys) resourcesJSON() string {
	if len(k.resources) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(k.resources)
	return string(b)
}

// anyResource stands, in resourceIDs, for the models and services of a
// device whose declarations the hub does not know: the verdict counts it
// as declaring every one (devices.resources_unknown).
const anyResource = "*"

// resourcesUnknown is devices.resources_unknown of ids, as resourceIDs
// gives them: 1 when the hub does not know them.
func resourcesUnknown(ids string) int {
	if ids == " "+anyResource+" " {
		return 1
	}
	return 0
}

// resourceIDs are the ids of the models and services the device's target
// declares, as the devices table keeps them, each between spaces:
// " model/a service/b "; " * " (anyResource) when the hub does not know
// them (see declaredIDs).
func (k keys) resourceIDs() string { return k.declared }

// declaredIDs are the models and services s declares, as resourceIDs
// gives them: the ids of rs, its target's release resources; from a tend
// that sends none (v0.1.0, or before its first tick rendered a target),
// those of its resources of kind model/ and service/; when it lists none
// either, unknown: a verdict waits for such a device as for one that
// declares the release's model, rather than take its silence for none.
func declaredIDs(s *api.Status, rs []api.ReleaseResource) string {
	var ids []string
	if rs != nil {
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
	} else {
		for _, r := range s.Resources {
			ids = append(ids, r.ID)
		}
	}
	ids = slices.DeleteFunc(ids, func(id string) bool {
		return !strings.HasPrefix(id, "model/") && !strings.HasPrefix(id, "service/") || len(id) > maxResourceIDBytes || strings.ContainsAny(id, " \t\n")
	})
	switch {
	case len(ids) == 0 && rs == nil, len(ids) > maxReleaseResources:
		return " " + anyResource + " "
	case len(ids) == 0:
		return ""
	}
	slices.Sort(ids)
	return " " + strings.Join(slices.Compact(ids), " ") + " "
}

// failureDetail says what a device rolled back and why, for the
// operator: "rolled back model/detector@sha256:1f16… (1.2.0): service/infer
// did not become healthy", at most maxDetailBytes.
func failureDetail(q *api.Quarantined) string {
	k := quarantineKey(q)
	what := k.Short()
	if strings.Contains(q.Release, "@sha1:") {
		what = api.ReleaseName(k, q.Release) // a commit's, by its revision
	}
	if q.Tag != "" {
		what += " (" + q.Tag + ")"
	}
	d := "rolled back " + what
	if q.Reason != "" {
		d += ": " + q.Reason
	}
	return cut(printable.OneLine(d), maxDetailBytes)
}

// cut shortens s to at most n bytes, on a rune boundary, marked with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
