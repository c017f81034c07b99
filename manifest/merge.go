package manifest

import (
	"reflect"
)

// checkTies reports a key that two profiles of equal priority set with
// different content: which one wins must not depend on file order.
func checkTies(layers []*layer) Errors {
	var errs Errors
	for i := 0; i < len(layers); {
		j := i + 1
		for j < len(layers) && layers[j].profile && layers[j].priority == layers[i].priority {
			j++
		}
		if layers[i].profile && j-i > 1 {
			errs = append(errs, tiesIn(layers[i:j])...)
		}
		i = j
	}
	return errs
}

func tiesIn(group []*layer) Errors {
	var errs Errors
	first := map[string]entry{}
	for _, l := range group {
		for _, e := range append(append([]entry(nil), l.entries...), l.vars...) {
			prev, ok := first[e.id]
			if !ok {
				first[e.id] = e
				continue
			}
			if prev.from.Layer == e.from.Layer || sameContent(prev, e) {
				continue
			}
			field := keyField(e.id)
			errs.add(e.origin.File, e.origin.Line(field), e.origin.Field+field,
				"%s is set differently by %s and by %s, both of priority %d: give one of them a lower priority, or make them equal",
				e.id, prev.from, e.from, l.priority)
		}
	}
	return errs
}

// sameContent reports whether two entries declare the same thing, wherever
// they are.
func sameContent(a, b entry) bool {
	return a.absent == b.absent && reflect.DeepEqual(withoutOrigin(a.value), withoutOrigin(b.value))
}

func withoutOrigin(v any) any {
	switch x := v.(type) {
	case Model:
		x.Origin = Origin{}
		return x
	case File:
		x.Origin = Origin{}
		return x
	case Service:
		x.Origin = Origin{}
		return x
	}
	return v
}

// slot is the current value of one key during a merge.
type slot struct {
	e        entry
	overrode []Source
	removed  bool
}

// merged is the result of merging entries by key, in the order the keys
// were first declared.
type merged struct {
	order []string
	slots map[string]*slot
}

// mergeEntries merges the entries layer by layer (entries returns a
// layer's): a later entry replaces an earlier one whole, an absent one
// removes it. A key twice in one layer is an error; absent on a key that
// is not there is a warning.
func (c *Composed) mergeEntries(layers []*layer, entries func(*layer) []entry, errs *Errors) *merged {
	m := &merged{slots: map[string]*slot{}}
	for _, l := range layers {
		inLayer := map[string]entry{}
		for _, e := range entries(l) {
			field := keyField(e.id)
			if first, dup := inLayer[e.id]; dup {
				errs.add(e.origin.File, e.origin.Line(field), e.origin.Field+field,
					"%s is declared twice (first at %s:%d); names must be unique per device", e.id, first.from.File, first.from.Line)
				continue
			}
			inLayer[e.id] = e
			s := m.slots[e.id]
			switch {
			case e.absent && (s == nil || s.removed):
				c.Warnings = append(c.Warnings, &Error{File: e.origin.File, Line: e.origin.Line(field), Field: e.origin.Field + field,
					Msg: e.id + " is absent: true but no earlier layer declares it, so there is nothing to remove: check the key and the profiles' priorities"})
			case s == nil:
				m.order = append(m.order, e.id)
				m.slots[e.id] = &slot{e: e}
			default:
				s.overrode = append(s.overrode, s.e.from)
				s.e, s.removed = e, e.absent
			}
		}
	}
	return m
}

func (m *merged) provenance() []Provenance {
	out := make([]Provenance, 0, len(m.order))
	for _, id := range m.order {
		s := m.slots[id]
		out = append(out, Provenance{ID: id, From: s.e.from, Overrode: s.overrode, Removed: s.removed})
	}
	sortProvenance(out)
	return out
}

func (c *Composed) mergeVars(layers []*layer) map[string]entry {
	var errs Errors // a layer's vars are a map: never twice
	m := c.mergeEntries(layers, func(l *layer) []entry { return l.vars }, &errs)
	c.Vars = m.provenance()
	out := map[string]entry{}
	for id, s := range m.slots {
		out[id[len("var/"):]] = s.e
	}
	return out
}

func (c *Composed) mergeResources(layers []*layer, errs *Errors) *merged {
	m := c.mergeEntries(layers, func(l *layer) []entry { return l.entries }, errs)
	c.Resources = m.provenance()
	return m
}

// build appends the merged resources to d, expanded by x.
func (m *merged) build(d *Device, x *expander) {
	for _, id := range m.order {
		s := m.slots[id]
		if s.removed {
			continue
		}
		switch v := x.item(id, s.e.value).(type) {
		case Model:
			d.Spec.Models = append(d.Spec.Models, v)
		case File:
			d.Spec.Files = append(d.Spec.Files, v)
		case Service:
			d.Spec.Services = append(d.Spec.Services, v)
		}
	}
}
