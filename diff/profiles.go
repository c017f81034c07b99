package diff

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// ProfileChange is a profile of the shared source paths that differs
// between base and head, and the inventory devices (those with a Device
// document in Git, composed with their labels in Git) it reaches.
type ProfileChange struct {
	Name   string `json:"profile"` // profile/NAME
	Change string `json:"change"`  // added, removed or changed
	// Devices are the devices whose plan changes because of it: an action
	// on a resource it declares (at base or head), or any action when its
	// variables changed; or the device cannot be planned at head.
	Devices []string `json:"devices"`
	// Applies counts the devices it applies to at base or head, whether
	// their plans change or not.
	Applies int `json:"applies"`
}

// Profile changes.
const (
	profileAdded   = "added"
	profileRemoved = "removed"
	profileChanged = "changed"
)

// layersSeen is what rendering a device found: the shared paths read at
// base and head, what was read of the device at each, and the device
// composed at each.
type layersSeen struct {
	base, head                 *sharedSet
	baseIn, headIn             *inputs
	baseComposed, headComposed *manifest.Composed
	// empty: the device composed at head declares nothing.
	empty bool
}

func (in *inputs) sharedSet() *sharedSet {
	if in == nil {
		return nil
	}
	return in.shared
}

// profileLayers reports whether a profile applies to the device at base or
// head.
func (s layersSeen) profileLayers() bool {
	return len(s.profiles()) > 0
}

// profiles returns the profiles that apply at base or head, by layer id.
func (s layersSeen) profiles() map[string]bool {
	out := map[string]bool{}
	for _, c := range []*manifest.Composed{s.baseComposed, s.headComposed} {
		if c == nil {
			continue
		}
		for _, l := range c.Layers {
			if l.Kind == manifest.KindProfile {
				out[l.ID()] = true
			}
		}
	}
	return out
}

// provenance returns where each resource of c came from, by id.
func provenance(c *manifest.Composed) map[string]manifest.Provenance {
	out := map[string]manifest.Provenance{}
	if c == nil {
		return out
	}
	for _, p := range c.Resources {
		out[p.ID] = p
	}
	return out
}

// setOrigins names the layer behind each action: where its resource came
// from at head; for a delete, the layer that removed it at head, or else
// the one that declared it at base.
func setOrigins(cs *planner.Changeset, base, head *manifest.Composed) {
	b, h := provenance(base), provenance(head)
	for i, a := range cs.Actions {
		p, ok := h[a.Resource]
		if a.Type == planner.Delete && (!ok || !p.Removed) {
			p, ok = b[a.Resource]
		}
		if !ok {
			continue
		}
		cs.Actions[i].Origin, cs.Actions[i].OriginFile, cs.Actions[i].OriginLine = p.From.Layer, p.From.File, p.From.Line
	}
}

// profileDiff is how one profile differs between base and head.
type profileDiff struct {
	change string
	vars   bool // its variables differ: they reach every layer's resources
}

// reach finds the profiles that differ between base and head and the
// devices each reaches.
type reach struct {
	compared map[[2]*sharedSet]map[string]profileDiff
	byName   map[string]*ProfileChange
}

func newReach() *reach {
	return &reach{compared: map[[2]*sharedSet]map[string]profileDiff{}, byName: map[string]*ProfileChange{}}
}

// compare returns the profiles that differ between the shared paths at
// base and head, comparing each once.
func (r *reach) compare(base, head *sharedSet) map[string]profileDiff {
	key := [2]*sharedSet{base, head}
	if out, ok := r.compared[key]; ok {
		return out
	}
	out := map[string]profileDiff{}
	if base != nil && head != nil && base != head {
		was, now := byName(base.parsed.Profiles()), byName(head.parsed.Profiles())
		for name, p := range now {
			q, ok := was[name]
			switch {
			case !ok:
				out[name] = profileDiff{change: profileAdded, vars: len(p.Spec.Vars) > 0}
			case content(p) != content(q):
				out[name] = profileDiff{change: profileChanged, vars: content(p.Spec.Vars) != content(q.Spec.Vars)}
			}
		}
		for name, q := range was {
			if _, ok := now[name]; !ok {
				out[name] = profileDiff{change: profileRemoved, vars: len(q.Spec.Vars) > 0}
			}
		}
	}
	for name, d := range out {
		if r.byName[name] == nil {
			r.byName[name] = &ProfileChange{Name: name, Change: d.change, Devices: []string{}}
		}
	}
	r.compared[key] = out
	return out
}

// compareShared compares the profiles of the shared paths at base and head
// (locs), whatever devices there are: a profile that reaches none is
// reported too.
func (r *reach) compareShared(rd *reader, locs [2]*location) error {
	if locs[0] == nil || locs[1] == nil || !locs[0].sharedPresent() || !locs[1].sharedPresent() {
		return nil
	}
	base, err := rd.sharedAt(locs[0])
	if err != nil {
		return err
	}
	head, err := rd.sharedAt(locs[1])
	if err != nil {
		return err
	}
	r.compare(base, head)
	return nil
}

func byName(ps []*manifest.Profile) map[string]*manifest.Profile {
	out := make(map[string]*manifest.Profile, len(ps))
	for _, p := range ps {
		out["profile/"+p.Metadata.Name] = p
	}
	return out
}

// content is a value as compared: its JSON, which leaves out where it was
// read from.
func content(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// add counts a rendered device in the profiles that apply to it.
func (r *reach) add(d Device, seen layersSeen, listed bool) {
	changed := r.compare(seen.base, seen.head)
	if len(changed) == 0 {
		return
	}
	applies := seen.profiles()
	var origins map[string]bool
	for name, pd := range changed {
		if !applies[name] {
			continue
		}
		pc := r.byName[name]
		pc.Applies++
		if !listed {
			continue
		}
		if origins == nil {
			origins = actionLayers(d.Plan, seen.baseComposed)
		}
		if d.Status == Failed || origins[name] || pd.vars && d.Plan != nil && !d.Plan.Empty() {
			pc.Devices = append(pc.Devices, d.Name)
		}
	}
}

// actionLayers returns the layers behind the actions of cs: each one's
// origin, and where its resource came from at base.
func actionLayers(cs *planner.Changeset, base *manifest.Composed) map[string]bool {
	out := map[string]bool{}
	if cs == nil {
		return out
	}
	b := provenance(base)
	for _, a := range cs.Actions {
		if a.Origin != "" {
			out[a.Origin] = true
		}
		if p, ok := b[a.Resource]; ok {
			out[p.From.Layer] = true
		}
	}
	return out
}

// result returns the changed profiles by name, their devices sorted.
func (r *reach) result() []ProfileChange {
	var out []ProfileChange
	for _, name := range sortedNames(r.byName) {
		pc := *r.byName[name]
		sort.Strings(pc.Devices)
		out = append(out, pc)
	}
	return out
}

// Summary says in one line what a changed profile does to the inventory
// devices, naming at most limit of them (0: every one).
func (p ProfileChange) Summary(limit int) string {
	var b strings.Builder
	b.WriteString(p.Name)
	if p.Change != profileChanged {
		b.WriteString(" (" + p.Change + ")")
	}
	switch {
	case p.Applies == 0 && len(p.Devices) == 0:
		b.WriteString(" reaches no device with a Device document in Git (it may still match devices known only by their agent config labels)")
	case len(p.Devices) == 0:
		b.WriteString(" applies to " + planner.Count(p.Applies, "device") + " but changes none of their plans")
	default:
		names := p.Devices
		if limit > 0 && len(names) > limit {
			names = append(names[:limit:limit], fmt.Sprintf("… and %d more", len(p.Devices)-limit))
		}
		b.WriteString(" reaches " + planner.Count(len(p.Devices), "device") + ": " + strings.Join(names, ", "))
	}
	return b.String()
}
