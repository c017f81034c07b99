package planner

import "strings"

// skip marks the actions an apply must leave out: the create or update of
// a resource its driver will refuse (State.Blocked) gets an Error, unless
// a delete in the same plan frees its path; the action of a held resource
// (Resource.Held) is held; and the action of a resource that depends on
// either is held too, naming it, so that a service is never moved onto a
// model or file that stays as it was.
func skip(actions []Action, resources []Resource, observed Observed) {
	var deleted []string
	for _, a := range actions {
		if a.Type == Delete {
			deleted = append(deleted, a.Resource)
		}
	}
	out := map[string]string{} // id → why what depends on it is held
	held := map[string]string{}
	for _, r := range resources {
		if r.Held != "" {
			held[r.ID] = r.Held
			out[r.ID] = r.ID + " (held)"
		}
	}
	for i := range actions {
		a := &actions[i]
		if h := held[a.Resource]; h != "" {
			a.Held = h
		}
		why := observed.Resources[a.Resource].Blocked
		if why == "" || a.Type != Create && a.Type != Update || freed(a.Resource, deleted) {
			continue
		}
		a.Error = why
		out[a.Resource] = a.Resource + " (will fail)"
	}
	if len(out) == 0 {
		return
	}
	deps := make(map[string][]string, len(resources))
	for _, r := range resources {
		deps[r.ID] = r.Deps
	}
	for i := range actions {
		a := &actions[i]
		if a.Skipped() || a.Type == Delete {
			continue
		}
		var why []string
		for _, d := range deps[a.Resource] {
			if w := out[d]; w != "" {
				why = append(why, w)
			}
		}
		if len(why) > 0 {
			a.Held = "uses " + strings.Join(why, ", ")
		}
	}
}

// freed reports whether deleting one of ids frees the path of id.
func freed(id string, ids []string) bool {
	for _, d := range ids {
		if strings.HasPrefix(d, id+"/") || strings.HasPrefix(id, d+"/") {
			return true
		}
	}
	return false
}
