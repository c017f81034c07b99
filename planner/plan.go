package planner

import (
	"slices"
	"sort"
	"strings"
)

// Options change how Plan treats edge cases.
type Options struct {
	// AllowEmpty lets an empty declaration delete every managed resource.
	AllowEmpty bool
}

// Plan compares the desired resources with the observed ones and returns the
// actions that close the gap. It is pure: the same inputs give the same
// Changeset, in the same order.
//
// A resource that differs from its declaration is updated. When the
// declaration is the same as at the last apply, the difference was made on
// the node: the action is marked as drift. Only resources tend created
// (Observed.Created) are ever deleted.
//
// Order: creates, updates and restarts by kind (models, files, services) and
// id, then deletes in reverse kind order. A delete that frees a path a create
// needs (a file replaced by a folder of the same name, or the reverse) runs
// first.
func Plan(desired Desired, observed Observed, opts Options) (*Changeset, error) {
	cs := &Changeset{Device: desired.Device, Revision: desired.Revision}
	if len(desired.Resources) == 0 && len(observed.Applied) > 0 && !opts.AllowEmpty {
		return nil, &EmptyError{Device: desired.Device, Revision: desired.Revision, Managed: len(observed.Applied)}
	}
	declared := make(map[string]bool, len(desired.Resources))
	var apply []Action
	var unchanged []int // indexes into desired.Resources
	for i, r := range desired.Resources {
		declared[r.ID] = true
		if a, ok := compare(r, observed); ok {
			apply = append(apply, a)
		} else {
			unchanged = append(unchanged, i)
		}
	}
	changed := restarts(desired.Resources, apply)
	owe(apply, observed)
	for _, i := range unchanged {
		r := desired.Resources[i]
		if a, ok := restart(r, changed); ok {
			apply = append(apply, a)
			continue
		}
		if owed := observed.Resources[r.ID].Owed; len(owed) > 0 {
			apply = append(apply, Action{Type: Restart, Resource: r.ID, Kind: r.Kind, Reason: owedReason(owed)})
			continue
		}
		cs.Unchanged++
	}
	sort.Slice(apply, func(i, j int) bool {
		if apply[i].Kind != apply[j].Kind {
			return apply[i].Kind < apply[j].Kind
		}
		return apply[i].Resource < apply[j].Resource
	})
	cs.Actions = order(apply, deletes(declared, observed))
	skip(cs.Actions, desired.Resources, observed)
	return cs, nil
}

// restarts marks the updates of resources whose inputs change in the same
// plan as restarting whole, and returns the actions by id, for the
// resources left unchanged to look up; nil when nothing has inputs.
func restarts(resources []Resource, apply []Action) map[string]*Action {
	deps := map[string]Resource{}
	for _, r := range resources {
		if len(r.Deps) > 0 {
			deps[r.ID] = r
		}
	}
	if len(deps) == 0 {
		return nil
	}
	changed := make(map[string]*Action, len(apply))
	for i := range apply {
		changed[apply[i].Resource] = &apply[i]
	}
	// An update of a resource whose inputs also change restarts it whole:
	// its spec alone would leave parts of it (replicas whose spec is
	// unchanged) on the old inputs.
	for i := range apply {
		r, ok := deps[apply[i].Resource]
		if !ok || apply[i].Type != Update {
			continue
		}
		if why, ok := restart(r, changed); ok {
			apply[i].Restart = true
			apply[i].Reason += "; " + why.Reason
		}
	}
	return changed
}

// owe makes an update of a resource that owes a restart restart it whole.
func owe(apply []Action, observed Observed) {
	for i := range apply {
		a := &apply[i]
		if owed := observed.Resources[a.Resource].Owed; len(owed) > 0 && a.Type == Update && !a.Restart {
			a.Restart = true
			a.Reason += "; " + owedReason(owed)
		}
	}
}

// owedReason names the dependencies a restart is owed for.
func owedReason(owed []string) string {
	ids := slices.Clone(owed)
	sort.Strings(ids)
	return "restart: " + strings.Join(ids, ", ") + " changed since it started (a restart owed by an interrupted apply)"
}

// deletes returns a delete of every resource tend created, manages, finds
// on the node and no longer declares, in reverse kind order: services stop
// before the files and models they use disappear.
func deletes(declared map[string]bool, observed Observed) []Action {
	var out []Action
	for id := range observed.Applied {
		if declared[id] || !observed.Resources[id].Exists || !observed.Created[id] {
			continue
		}
		kind, _ := KindOf(id)
		out = append(out, Action{Type: Delete, Resource: id, Kind: kind, Reason: "no longer declared"})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind > out[j].Kind
		}
		return out[i].Resource < out[j].Resource
	})
	return out
}

// order runs deletes last, except a delete that frees a path one of the
// sorted apply actions needs (a file replaced by a folder of the same
// name, or the reverse), which runs first.
func order(apply, deletes []Action) []Action {
	var first, last []Action
	var ids []string
	if len(deletes) > 0 {
		ids = make([]string, len(apply))
		for i, a := range apply {
			ids[i] = a.Resource
		}
		sort.Strings(ids)
	}
	for _, d := range deletes {
		if conflicts(d.Resource, ids) {
			first = append(first, d)
		} else {
			last = append(last, d)
		}
	}
	return append(append(first, apply...), last...)
}

// conflicts reports whether deleting id frees a path that one of the
// sorted ids needs: an id below it (id/…) or above it.
func conflicts(id string, sorted []string) bool {
	i := sort.SearchStrings(sorted, id+"/")
	if i < len(sorted) && strings.HasPrefix(sorted[i], id+"/") {
		return true
	}
	for p := id; ; {
		j := strings.LastIndexByte(p, '/')
		if j <= 0 {
			return false
		}
		p = p[:j]
		k := sort.SearchStrings(sorted, p)
		if k < len(sorted) && sorted[k] == p {
			return true
		}
	}
}

// compare returns the action that makes r's observed state match its
// declaration, or false when it already does.
//
// A managed resource whose node state differs from what tend last applied
// was changed on the node: the action reverts drift, also when Git changed
// the resource in the same plan (its reason then says both).
func compare(r Resource, observed Observed) (Action, bool) {
	st := observed.Resources[r.ID]
	applied, managed := observed.Applied[r.ID]
	unchangedInGit := managed && fieldsEqual(applied, r.Fields)
	a := Action{Resource: r.ID, Kind: r.Kind, Sensitive: r.Sensitive}
	if !st.Exists {
		a.Type = Create
		a.Changes = diff(nil, r.Fields)
		switch {
		case unchangedInGit:
			a.setDrift("drift: deleted on node")
		case r.Reason != "":
			a.Reason = "declared: " + r.Reason
		default:
			a.Reason = "declared"
		}
		if managed && !unchangedInGit && applied != nil {
			a.addDrift("deleted on node")
		}
		return a, true
	}
	changes := diff(st.Fields, r.Fields)
	if len(changes) == 0 {
		return a, false
	}
	a.Type = Update
	a.Changes = changes
	what := changedFields(changes)
	// edited: Git changed the resource and so did someone on the node.
	edited := managed && !unchangedInGit && applied != nil && len(diff(st.Fields, applied)) > 0
	if other := replacedBy(changes); other != "" {
		// Not a different value but a different thing: say so plainly.
		switch {
		case unchangedInGit:
			a.setDrift("drift: replaced by " + other + " on node")
		case edited:
			a.Reason = "update: " + changedFields(diff(applied, r.Fields)) + " changed in Git"
			a.addDrift("replaced by " + other + " on node")
		default:
			a.Reason = "declared: " + other + " is in the way on node"
		}
		return a, true
	}
	switch {
	case unchangedInGit && st.Note != "":
		a.setDrift("drift: " + st.Note)
	case unchangedInGit:
		a.setDrift("drift: " + what + " changed on node")
	case r.Reason != "":
		a.Reason = "update: " + r.Reason
	case managed:
		a.Reason = "update: " + changedFields(orChanges(diff(applied, r.Fields), changes)) + " changed in Git"
	default:
		a.Reason = "declared: replaces " + what + " found on node"
	}
	if edited {
		note := st.Note
		if note == "" {
			note = changedFields(diff(st.Fields, applied)) + " changed on node"
		}
		a.addDrift(note)
	}
	return a, true
}

// orChanges returns cs, or when it is empty (nothing known of what tend
// applied) the changes against the node.
func orChanges(cs, node []Change) []Change {
	if len(cs) == 0 {
		return node
	}
	return cs
}

// addDrift marks an action whose reason is a change in Git as reverting
// drift too: what someone changed on the node is appended to its reason.
func (a *Action) addDrift(what string) {
	a.Reason += "; " + driftPrefix + what
	a.Drift = Drift(what)
}

// driftPrefix starts the reason of an action that reverts drift.
const driftPrefix = "drift: "

// setDrift marks a as reverting drift, with reason (which starts with
// driftPrefix) as its reason: one string for both.
func (a *Action) setDrift(reason string) {
	a.Reason, a.Drift = reason, Drift(strings.TrimPrefix(reason, driftPrefix))
}

// restart returns a restart of r when something it depends on changes in
// this plan. The reason names each dependency, and for a model its old and
// new digest ("restart: model/detector sha256:ab… →
// sha256:cd…").
func restart(r Resource, changed map[string]*Action) (Action, bool) {
	var why []string
	detailed := false
	for _, d := range r.Deps {
		a := changed[d]
		if a == nil {
			continue
		}
		if a.Kind == KindModel && len(a.Changes) == 1 && a.Changes[0].From != "" {
			c := a.Changes[0]
			why = append(why, d+" "+ShortDigest(c.From)+" → "+ShortDigest(c.To))
			detailed = true
			continue
		}
		why = append(why, d)
	}
	if len(why) == 0 {
		return Action{}, false
	}
	sort.Strings(why)
	reason := "restart: " + strings.Join(why, ", ")
	if !detailed {
		reason += " changed"
	}
	return Action{Type: Restart, Resource: r.ID, Kind: r.Kind, Reason: reason}, true
}

// ShortDigest shortens a digest to its algorithm and first 12 hex digits,
// as every plan, status and diff prints one: sha256:0123456789ab. Any
// other value is returned as it is.
func ShortDigest(v string) string {
	if alg, hex, ok := strings.Cut(v, ":"); ok && alg == "sha256" && len(hex) > 12 {
		return alg + ":" + hex[:12]
	}
	return v
}

func diff(have, want []Field) []Change {
	var out []Change
	for _, w := range want {
		from := ""
		for _, h := range have {
			if h.Name == w.Name {
				from = h.Value
				break
			}
		}
		if from != w.Value {
			out = append(out, Change{Field: w.Name, From: from, To: w.Value})
		}
	}
	return out
}

// replacedBy names what stands where a resource should be when an observer
// reports a placeholder such as "<directory>" instead of a value.
func replacedBy(cs []Change) string {
	for _, c := range cs {
		if strings.HasPrefix(c.From, "<") && strings.HasSuffix(c.From, ">") {
			what := strings.Trim(c.From, "<>")
			if strings.HasPrefix(what, "not ") {
				return "something " + what
			}
			return "a " + what
		}
	}
	return ""
}

func changedFields(cs []Change) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Field
	}
	return strings.Join(names, ", ")
}

func fieldsEqual(a, b []Field) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
