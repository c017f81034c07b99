package planner

import (
	"fmt"
	"strings"
)

// EmptyError refuses a plan that would delete every managed resource because
// the declaration is empty. An empty commit is far more often a mistake (a
// moved folder, a bad merge) than a wish to wipe the device.
type EmptyError struct {
	Device   string
	Revision string
	Managed  int
}

func (e *EmptyError) Error() string {
	return fmt.Sprintf("device %s declares no resources at %s: refusing to delete the %d resources tend manages; "+
		"if this is intended, set allowEmpty: true in agent.yaml or pass --allow-empty", e.Device, e.Revision, e.Managed)
}

// SkippedError says which actions of a plan an apply leaves out, and why:
// they will fail, or they are held. The other actions are applied.
type SkippedError struct {
	Skipped []Action
}

func (e *SkippedError) Error() string {
	var b strings.Builder
	b.WriteString("left out of the apply: ")
	for i, a := range e.Skipped {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(a.Resource + " (")
		if a.Error != "" {
			b.WriteString("will fail: " + a.Error)
		} else {
			b.WriteString("held: " + a.Held)
		}
		b.WriteString(")")
	}
	return b.String()
}

// Skip returns a SkippedError naming the actions of c an apply leaves out,
// or nil when it leaves out none.
func (c *Changeset) Skip() error {
	if s := c.Skipped(); len(s) > 0 {
		return &SkippedError{Skipped: s}
	}
	return nil
}
