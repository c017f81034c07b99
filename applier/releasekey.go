package applier

import (
	"slices"
	"strings"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
	"github.com/tend-dev/tend/source"
)

// ReleaseOf is the key of the release d makes against what inv says was
// applied (see api.ReleaseKey), "" when d changes nothing the inventory
// records:
//   - commit:HASH when d's commit changed what the device runs: its
//     declarations are not the applied ones (render.Desired.Declaration;
//     an inventory that keeps none counts any new commit), or a resource
//     changes other than by a digest its tag or semver policy resolved;
//   - otherwise the models' and container images' digests that moved,
//     model/NAME@sha256:… and service/NAME@sha256:…, joined;
//   - "" at the applied commit when no digest moved: what differs (an
//     entry a failed apply left, a spec another tend hashed otherwise) is
//     no new release.
//
// So a commit that changes nothing on the device is no part of the key,
// and two devices that take the same new digest share it. A release an
// apply began and left part way (inv.Pending) keeps its whole key while
// what is left of it is a part of it. A release is quarantined by the
// parts of its key (see releaseKeys).
func ReleaseOf(inv *Inventory, d *render.Desired) api.ReleaseKey {
	rev, err := source.ParseRevision(d.Revision)
	if err != nil {
		return ""
	}
	moved, other := changes(inv, d)
	if len(moved) == 0 && !other {
		return ""
	}
	before, _ := source.ParseRevision(inv.Revision)
	newCommit := !before.SameCommit(rev)
	switch {
	case newCommit && (other || inv.Declaration == "" || inv.Declaration != d.Declaration()):
		return api.CommitRelease(rev.Commit)
	case len(moved) == 0:
		return ""
	}
	return inv.continuing(api.DigestRelease(moved))
}

// continuing is k, or the release an earlier apply began and left part
// way (Pending) when k is what is left of it: every part of k is one of
// Pending's.
func (inv *Inventory) continuing(k api.ReleaseKey) api.ReleaseKey {
	if inv.Pending == "" {
		return k
	}
	pending := inv.Pending.Parts()
	for _, p := range k.Parts() {
		if !slices.Contains(pending, p) {
			return k
		}
	}
	return inv.Pending
}

// changes compares d with what inv says was applied: moved lists, as
// "ID@sha256:…" (ReleaseKey), the models and container services whose
// digest moved and nothing else of theirs changed beside it; other says
// some other resource changes, comes or goes.
func changes(inv *Inventory, d *render.Desired) (moved []string, other bool) {
	declared := make(map[string]bool, len(d.Resources))
	for _, r := range d.Resources {
		declared[r.ID] = true
		e, managed := inv.Resources[r.ID]
		if managed && slices.Equal(e.Fields, r.Fields) {
			continue
		}
		digest, field := resolvedDigest(d.Specs[r.ID])
		if !managed || !strings.HasPrefix(digest, "sha256:") || fieldValue(e.Fields, field) == digest {
			other = true
			continue
		}
		moved = append(moved, ReleaseKey(r.ID, digest))
	}
	for id := range inv.Resources {
		if !declared[id] {
			other = true
		}
	}
	return moved, other
}

// resolvedDigest is the digest a model or a container service resolved
// to, the tag it resolved through, and the field of the plan that holds
// it; "" for any other spec.
func resolvedDigest(spec any) (digest, field string) {
	switch s := spec.(type) {
	case render.Model:
		return s.Digest, planner.FieldDigest
	case render.Service:
		if s.Kind == render.KindContainer {
			return s.ImageDigest, planner.FieldImage
		}
	}
	return "", ""
}
