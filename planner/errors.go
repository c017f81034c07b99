package planner

import "fmt"

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
