package manifest

import (
	"fmt"
	"sort"
	"strings"
)

// KindProfile is a document that declares resources for every device its
// selector matches.
const KindProfile = "Profile"

// Profile declares models, files, services and variables for every device
// whose labels its selector matches.
type Profile struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   ProfileMetadata `json:"metadata" jsonschema:"required"`
	Spec       ProfileSpec     `json:"spec"`

	Origin Origin `json:"-"`
}

// ProfileMetadata names a profile or a rollout.
type ProfileMetadata struct {
	Name string `json:"name" jsonschema:"required"`
}

// ProfileSpec is what a profile applies, and to which devices.
type ProfileSpec struct {
	// Selector picks the devices by their labels; {} matches every device.
	Selector *Selector `json:"selector" jsonschema:"required"`
	// Priority orders the profiles that match a device: lower applies
	// first, a later one overrides it. A Device document is always last.
	Priority int `json:"priority,omitempty"`
	// Vars are the values of ${var:NAME} in the resources of every layer.
	Vars     map[string]string `json:"vars,omitempty"`
	Models   []Model           `json:"models,omitempty"`
	Files    []File            `json:"files,omitempty"`
	Services []Service         `json:"services,omitempty"`
}

// Selector is a Kubernetes label selector: every matchLabels entry and
// every matchExpressions requirement must hold.
type Selector struct {
	MatchLabels      map[string]string `json:"matchLabels,omitempty"`
	MatchExpressions []Requirement     `json:"matchExpressions,omitempty"`
}

// Requirement is one condition on a label.
type Requirement struct {
	Key      string   `json:"key" jsonschema:"required"`
	Operator string   `json:"operator" jsonschema:"required,enum=In,enum=NotIn,enum=Exists,enum=DoesNotExist"`
	Values   []string `json:"values,omitempty"`
}

// Selector operators.
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
)

// Matches reports whether labels satisfy s. An empty selector matches
// every device; NotIn holds for a device without the label, as in
// Kubernetes.
func (s Selector) Matches(labels map[string]string) bool {
	for k, v := range s.MatchLabels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	for _, r := range s.MatchExpressions {
		if !r.matches(labels) {
			return false
		}
	}
	return true
}

func (r Requirement) matches(labels map[string]string) bool {
	v, ok := labels[r.Key]
	switch r.Operator {
	case OpIn:
		return ok && contains(r.Values, v)
	case OpNotIn:
		return !ok || !contains(r.Values, v)
	case OpExists:
		return ok
	case OpDoesNotExist:
		return !ok
	}
	return false
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// String writes s as Kubernetes does: hw=orin,site in (a,b),!gpu.
func (s Selector) String() string {
	var parts []string
	for _, k := range sortedKeys(s.MatchLabels) {
		parts = append(parts, k+"="+s.MatchLabels[k])
	}
	for _, r := range s.MatchExpressions {
		switch r.Operator {
		case OpIn, OpNotIn:
			parts = append(parts, fmt.Sprintf("%s %s (%s)", r.Key, strings.ToLower(r.Operator), strings.Join(r.Values, ",")))
		case OpExists:
			parts = append(parts, r.Key)
		default:
			parts = append(parts, "!"+r.Key)
		}
	}
	if len(parts) == 0 {
		return "every device"
	}
	return strings.Join(parts, ",")
}

// check reports what is wrong with s, the selector at field (e.g.
// spec.selector) of a document read from info.
func (s Selector) check(info *document, field string, errs *Errors) {
	at := func(field, format string, args ...any) {
		errs.add(info.file, nearestLine(info, field), field, format, args...)
	}
	for _, k := range sortedKeys(s.MatchLabels) {
		if k == "" {
			at(field+".matchLabels", "a label key may not be empty")
		}
	}
	for i, r := range s.MatchExpressions {
		f := fmt.Sprintf("%s.matchExpressions[%d]", field, i)
		if r.Key == "" {
			at(f+".key", "missing: the label this requirement is about")
		}
		switch r.Operator {
		case OpIn, OpNotIn:
			if len(r.Values) == 0 {
				at(f+".values", "%s needs at least one value", r.Operator)
			}
		case OpExists, OpDoesNotExist:
			if len(r.Values) > 0 {
				at(f+".values", "%s takes no values: remove them", r.Operator)
			}
		default:
			at(f+".operator", "unknown operator %q: use In, NotIn, Exists or DoesNotExist", r.Operator)
		}
	}
}

// varName is the syntax of a variable's name.
var varName = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

// check reports what is wrong with a profile beyond its shape: its name,
// selector and variable names. Its resources are checked once merged into
// a device (see Compose).
func (p *Profile) check(info *document, errs *Errors) {
	checkName(info, "profile", p.Metadata.Name, errs)
	if p.Spec.Selector == nil {
		errs.add(info.file, nearestLine(info, "spec.selector"), "spec.selector",
			"missing: the devices this profile applies to, e.g. {matchLabels: {hw: orin}}; {} applies to every device")
	} else {
		p.Spec.Selector.check(info, "spec.selector", errs)
	}
	for _, k := range sortedKeys(p.Spec.Vars) {
		if !varName().MatchString(k) {
			errs.add(info.file, lineOf(info, "spec.vars."+k, info.line), "spec.vars."+k,
				"invalid variable name %q: use letters, digits, '_', '-' and '.', starting with a letter or '_'", k)
		}
	}
}

// checkName reports a missing or invalid metadata.name of a document of
// what (profile, rollout).
func checkName(info *document, what, name string, errs *Errors) {
	if name == "" {
		errs.add(info.file, info.line, "metadata.name", "missing: the name of the %s", what)
	} else if len(name) > 63 || !resourceName().MatchString(name) {
		errs.add(info.file, lineOf(info, "metadata.name", info.line), "metadata.name",
			"invalid name %q: use lowercase letters, digits, '-', '_' and '.', at most 63 characters", name)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// nearestLine is the line of field, or of the nearest of its parents that
// has one (a missing field is reported at its item).
func nearestLine(info *document, field string) int {
	for f := field; f != ""; {
		if l, ok := info.lines[f]; ok {
			return l
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return info.line
}
