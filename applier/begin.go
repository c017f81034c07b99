package applier

// Forgetter is a driver that keeps what it read for the rest of a tick
// (records, resolved tags, bytes downloaded). Begin has it forget them, so
// that a driver kept for every tick of an agent reads the node and the
// registries afresh at each.
type Forgetter interface {
	Forget()
}

// Begin starts a tick: the applier forgets the inventory it read, and its
// drivers what they kept (see Forgetter), so that one Applier and its
// drivers serve every tick of an agent.
func (a *Applier) Begin() {
	a.mu.Lock()
	a.loaded = nil
	a.mu.Unlock()
	for _, d := range a.drivers {
		if f, ok := d.(Forgetter); ok {
			f.Forget()
		}
	}
}
