package service

import "github.com/tend-dev/tend/applier"

var _ applier.Forgetter = (*Driver)(nil)

// Forget drops the images the driver resolved in the last tick: the next
// tick asks their registries again, so a moved tag is seen.
func (d *Driver) Forget() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resolved = nil
}
