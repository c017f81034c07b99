package planner

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is the kind of a resource.
type Kind int

// Resource kinds, in the order a plan applies them.
const (
	KindModel Kind = iota
	KindFile
	KindService
)

var kindNames = [...]string{"model", "file", "service"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// ParseKind returns the Kind named s.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown resource kind %q", s)
}

// Field is one named property of a resource that must match on the node,
// such as a file's content digest or its mode.
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Resource is one resource as the planner compares it.
type Resource struct {
	ID     string  // e.g. file/etc/infer/config.yaml
	Kind   Kind    //
	Fields []Field // what must match on the node, in a fixed order
	// Deps are the ids of resources whose change restarts this one.
	Deps []string
	// Reason, when set, says why the fields are what they are when that is
	// not the declaration alone: a model tag resolved in its registry
	// ("sha256:ab… → sha256:cd… (new tag v8.4 matches >=8.0.0 <9)"). It
	// replaces the generic reason of a create or of an update that is not
	// drift.
	Reason string
	// Sensitive hides the content of a file in every output: diffs show
	// sizes and digests only.
	Sensitive bool
	// Held, when set, says why this resource is not to be changed now (a
	// model whose new ref cannot be resolved: its registry is
	// unreachable). Its action, and every action of a resource that
	// depends on it, is planned and left out of the apply.
	Held string
}

// Desired is everything declared for one device at one revision.
type Desired struct {
	Device    string
	Revision  string
	Resources []Resource
}

// State is what an observer saw of one resource on the node.
type State struct {
	Exists bool
	Fields []Field
	// Note, when set, says in words what differs on the node, for the
	// reason of a drift action ("model.onnx edited, extra.txt added").
	Note string
	// Owed lists the dependencies (by id) that changed since the resource
	// was started: a restart they caused did not happen (an apply was
	// interrupted between the two). The plan restarts it.
	Owed []string
	// Blocked, when set, says why the driver will refuse to create or
	// update the resource over what is there (a directory where a file or
	// a model's link goes), and what to do.
	Blocked string
}

// Observed is what is on the node: the state of every desired or managed
// resource, and the inventory of what tend applied.
type Observed struct {
	// Resources holds the observed state by resource id. A missing id is
	// taken as not existing.
	Resources map[string]State
	// Applied holds, for each resource tend manages, the fields it had when
	// tend last applied it: the reference for telling drift from a change
	// in Git.
	Applied map[string][]Field
	// Created holds the managed resources tend itself created. Only these
	// are deleted when no longer declared; a resource that was on the node
	// before tend managed it is left there.
	Created map[string]bool
}

// ActionType says what an action does to a resource.
type ActionType int

// Action types.
const (
	Create ActionType = iota
	Update
	Restart
	Delete
)

var actionNames = [...]string{"create", "update", "restart", "delete"}
var actionSymbols = [...]string{"+", "~", "~", "-"}

// String returns the name of the action as JSON output prints it.
func (t ActionType) String() string {
	if int(t) < len(actionNames) {
		return actionNames[t]
	}
	return fmt.Sprintf("action(%d)", int(t))
}

// Symbol returns the one-character mark text output prints.
func (t ActionType) Symbol() string {
	if int(t) < len(actionSymbols) {
		return actionSymbols[t]
	}
	return "?"
}

// MarshalText writes the action's name.
func (t ActionType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads an action's name.
func (t *ActionType) UnmarshalText(b []byte) error {
	for i, n := range actionNames {
		if n == string(b) {
			*t = ActionType(i)
			return nil
		}
	}
	return fmt.Errorf("unknown action %q", b)
}

// Change is one field that differs between node and declaration.
type Change struct {
	Field string `json:"field"`
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
}

// Action is one step of a plan.
type Action struct {
	Type     ActionType `json:"action"`
	Resource string     `json:"resource"`
	Kind     Kind       `json:"-"`
	Reason   string     `json:"reason"`
	// Drift, when set, says how the node differs from what tend last
	// applied while the declaration did not change: someone changed the
	// node. Reason then reads "drift: " followed by it.
	Drift   Drift    `json:"drift,omitempty"`
	Changes []Change `json:"changes,omitempty"`
	// Restart is set on an update whose inputs change in the same plan:
	// all of it restarts, not only the parts whose own spec changed.
	Restart bool `json:"restart,omitempty"`
	// Sensitive is copied from the resource: its content is never shown.
	Sensitive bool `json:"sensitive,omitempty"`
	// Diff, when a diff was asked for, says what the update changes line
	// by line (see ContentDiff).
	Diff string `json:"diff,omitempty"`
	// Error, when set, says why this action will fail: the apply leaves
	// it out, with every action of a resource that depends on it, and
	// fails.
	Error string `json:"error,omitempty"`
	// Held, when set, says why this action is not applied now: the apply
	// leaves it out and fails, naming it.
	Held string `json:"held,omitempty"`
	// Origin, in a CI diff, is the layer the resource's declaration came
	// from (profile/NAME or device/NAME; for a delete, the layer that
	// removed it with absent: true, or else declared it at base), with
	// its file and line. Text plans print it after the reason.
	Origin     string `json:"origin,omitempty"`
	OriginFile string `json:"originFile,omitempty"`
	OriginLine int    `json:"originLine,omitempty"`
}

// Drift says in words what was changed on the node ("content changed on
// node", "deleted on node"); the empty Drift is none. JSON writes it as
// true (or leaves it out): the words are in the action's reason.
type Drift string

// MarshalJSON writes true.
func (d Drift) MarshalJSON() ([]byte, error) { return []byte(strconv.FormatBool(d != "")), nil }

// UnmarshalJSON reads a boolean. The words are not in the JSON (they are in
// the reason): true reads as "changed on node".
func (d *Drift) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseBool(string(b))
	if err != nil {
		return fmt.Errorf("drift: want true or false, got %s", b)
	}
	*d = ""
	if v {
		*d = "changed on node"
	}
	return nil
}

// Skipped reports whether an apply leaves the action out: it will fail,
// or it is held.
func (a Action) Skipped() bool { return a.Error != "" || a.Held != "" }

// IsDrift reports whether the action reverts drift.
func (a Action) IsDrift() bool { return a.Drift != "" }

// OnlyDrift reports whether the action reverts drift and nothing else: Git
// did not change the resource, so the action puts back what was applied.
func (a Action) OnlyDrift() bool { return a.IsDrift() && strings.HasPrefix(a.Reason, driftPrefix) }

func (a Action) String() string {
	return fmt.Sprintf("%s %s (%s)", a.Type.Symbol(), a.Resource, a.Reason)
}

// Summary counts a plan's actions the way its last line prints them.
type Summary struct {
	Add       int `json:"add"`
	Change    int `json:"change"`
	Delete    int `json:"delete"`
	Unchanged int `json:"unchanged"`
}

// Changeset is the plan for one device: ordered actions and the count of
// resources left alone.
type Changeset struct {
	Device    string
	Revision  string
	Actions   []Action
	Unchanged int
}

// Summary counts the actions by what they do.
func (c *Changeset) Summary() Summary {
	s := Summary{Unchanged: c.Unchanged}
	for _, a := range c.Actions {
		switch a.Type {
		case Create:
			s.Add++
		case Update, Restart:
			s.Change++
		case Delete:
			s.Delete++
		}
	}
	return s
}

// Empty reports whether the plan changes nothing.
func (c *Changeset) Empty() bool { return len(c.Actions) == 0 }

// Skipped returns the actions an apply leaves out (see Action.Skipped).
func (c *Changeset) Skipped() []Action {
	var out []Action
	for _, a := range c.Actions {
		if a.Skipped() {
			out = append(out, a)
		}
	}
	return out
}

// Drifted returns the actions that revert drift.
func (c *Changeset) Drifted() []Action {
	var out []Action
	for _, a := range c.Actions {
		if a.IsDrift() {
			out = append(out, a)
		}
	}
	return out
}
