package service

import "github.com/tend-dev/tend/applier"

var _ applier.Forgetter = (*Driver)(nil)

// Forget drops the image resolvers of the last tick, and with them the
// images they resolved: the next tick asks their registries again, so a
// moved tag is seen.
func (d *Driver) Forget() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resolvers = nil
}
