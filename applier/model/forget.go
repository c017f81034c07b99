package model

import "github.com/tend-dev/tend/applier"

var _ applier.Forgetter = (*Driver)(nil)

// Forget drops what the driver kept from the last tick (model records,
// artifacts read, versions prepared, the quarantine) and its count of bytes downloaded:
// the next tick reads them afresh, as a new driver would.
func (d *Driver) Forget() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.records)
	clear(d.arts)
	clear(d.prepared)
	d.quarantined = nil
	clear(d.keptDigests)
	d.loaded.Store(0)
}
