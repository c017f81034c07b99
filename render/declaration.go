package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/tend-dev/tend/planner"
)

// Declaration is a digest of what d declares for the device, with every
// model and container image as declared (ref, policy, include) rather
// than as resolved. Two renders whose declarations are the same have the
// same one, whatever their commits and wherever their tags moved: a
// commit that changes nothing on the device leaves it as it was, and a
// model retrained and pushed as a tag does not move it. The applier
// keeps the applied one (see applier.ReleaseOf).
func (d *Desired) Declaration() string {
	h := sha256.New()
	for _, r := range d.Resources {
		fmt.Fprintf(h, "%q\n", r.ID)
		switch s := d.Specs[r.ID].(type) {
		case Model:
			fmt.Fprintf(h, "ref=%q policy=%q path=%q include=%q\n", s.Ref, s.Policy, s.Path, s.Include)
			continue
		case Service:
			fmt.Fprintf(h, "declared=%q\n", s.Declared)
			for _, f := range r.Fields {
				if f.Name != planner.FieldSpec && f.Name != planner.FieldImage {
					fmt.Fprintf(h, "%q=%q\n", f.Name, f.Value)
				}
			}
			continue
		}
		for _, f := range r.Fields {
			fmt.Fprintf(h, "%q=%q\n", f.Name, f.Value)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
