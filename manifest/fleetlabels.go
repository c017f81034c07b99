package manifest

import (
	"fmt"
	"path"
	"strings"
)

// FleetLabels is what a fleet's files say of where each device stands,
// read once for the whole fleet: the labels of every Device document and
// every Rollout. The hub reads it with --fleet-source to work out each
// device's rollout and wave itself rather than believe its reports.
type FleetLabels struct {
	// Labels are each device's labels from its Device documents, by
	// device name (the first document's value winning where two
	// disagree, as composing the device reports).
	Labels   map[string]map[string]string
	Rollouts []*Rollout // by name
}

// ReadFleetLabels parses every Device and Rollout document of inputs.
// Problems of the files come back by file and line, with what parsed.
func ReadFleetLabels(inputs []Input) (*FleetLabels, error) {
	set, errs := parse(inputs, "")
	out := &FleetLabels{Labels: map[string]map[string]string{}}
	for _, name := range set.deviceNames() {
		out.Labels[name] = set.labels(name)
	}
	for i := range set.rollouts {
		r := set.rollouts[i].roll
		out.Rollouts = append(out.Rollouts, &r)
	}
	if len(errs) > 0 {
		sortErrors(errs)
		return out, errs
	}
	return out, nil
}

// RolloutOf returns the rollout of rollouts whose selector matches
// labels: nil when none does, an error naming both when two do (a
// device follows one rollout).
func RolloutOf(rollouts []*Rollout, labels map[string]string) (*Rollout, error) {
	var found *Rollout
	for _, r := range rollouts {
		if r.Spec.Selector == nil || !r.Spec.Selector.Matches(labels) {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("rollout/%s and rollout/%s both select labels %s: a device follows one rollout; narrow their selectors",
				found.Metadata.Name, r.Metadata.Name, labelList(labels))
		}
		found = r
	}
	return found, nil
}

// FleetDirs are the folders of the fleet repo that hold every device's
// manifests under c's source paths: each path up to its first
// placeholder ({device}, {label:KEY}), so that devices/{device} reads
// devices/. A ref with a placeholder names no one ref for the fleet, and
// is refused.
func (c *AgentConfig) FleetDirs() ([]string, error) {
	if strings.Contains(c.Source.Ref, "{") {
		e := &Error{Field: "source.ref", Msg: fmt.Sprintf("%q holds a placeholder: the hub reads the whole fleet at one ref; name it (main)", c.Source.Ref)}
		c.locate(e)
		return nil, e
	}
	var out []string
	for _, p := range c.SourcePatterns() {
		if i := strings.IndexByte(p, '{'); i >= 0 {
			p = path.Dir(p[:i] + "x") // the folder the placeholder is in
		}
		if p == "." {
			p = ""
		}
		out = append(out, p)
	}
	return out, nil
}
