package model

import (
	"fmt"
	"time"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/planner"
)

// quarantine returns the releases rolled back on this node, read once per
// driver.
func (d *Driver) quarantine() (map[string]applier.Quarantined, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.quarantined != nil {
		return d.quarantined, nil
	}
	q, err := applier.LoadQuarantine(d.state)
	if err != nil {
		return nil, err
	}
	d.quarantined = q
	return q, nil
}

// kept is the version of model name to keep when every version its ref
// names is quarantined: the active one, unless it is quarantined too;
// then the last one pulled before it that is not; nil if none.
func (d *Driver) kept(rec *record, name string) *version {
	act := rec.active()
	if act == nil {
		return nil
	}
	q, _ := d.quarantine() // read by resolveSkipping already
	out := func(v *version) bool {
		_, ok := q[applier.ReleaseKey(planner.ModelID(name), v.Digest)]
		return ok
	}
	if !out(act) {
		return act
	}
	for i := len(rec.Versions) - 1; i >= 0; i-- {
		if v := &rec.Versions[i]; v.Digest != act.Digest && !out(v) {
			return v
		}
	}
	return nil
}

// quarantinedError says why the newest version of model name, r, was
// passed over, and what to do.
func (d *Driver) quarantinedError(name string, r transport.Resolved) error {
	key := applier.ReleaseKey(planner.ModelID(name), r.Digest)
	q, _ := d.quarantine() // read by resolveSkipping already
	e := q[key]
	what := planner.ModelID(name)
	if r.Tag != "" {
		what += " " + r.Tag
	}
	short := planner.ShortDigest(r.Digest)
	return fmt.Errorf("%s (%s) was rolled back on this node at %s: %s; push a new version, or run tend retry %s@%s",
		what, short, e.At.UTC().Format(time.RFC3339), e.Reason, planner.ModelID(name), short)
}
