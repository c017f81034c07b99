package model

import (
	"errors"
	"fmt"
	"time"

	"github.com/tend-dev/tend/internal/printable"
	"github.com/tend-dev/tend/internal/statedir"
)

// unpackReserve is the room unpacking always leaves free on stateDir's
// file system.
const unpackReserve = 64 << 20

// refusal is one refused digest, kept in statedir's models/refused.json:
// its layers unpacked past the room they had (a decompression bomb, or a
// model that does not fit), and it is not tried again on every tick.
type refusal struct {
	Model  string    `json:"model"`
	Limit  int64     `json:"limit"` // the room it had, in bytes
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

func (d *Driver) refusals() (map[string]refusal, error) {
	r := map[string]refusal{}
	if _, err := statedir.ReadJSON(d.dir.Refused(), &r); err != nil {
		return nil, err
	}
	return r, nil
}

// unpackLimit is the room unpacking a version may take: what stateDir's
// file system has free, less a reserve.
func (d *Driver) unpackLimit() (int64, error) {
	free, err := d.opts.Free(d.state)
	if err != nil {
		return 0, err
	}
	return max(free-unpackReserve, 1), nil
}

// refused returns why digest is not tried again with limit bytes of room,
// or nil: a digest that unpacked past its room is tried again only once
// the room has doubled.
func (d *Driver) refused(digest string, limit int64) error {
	all, err := d.refusals()
	if err != nil {
		return err
	}
	r, ok := all[digest]
	if !ok || limit >= 2*r.Limit {
		return nil
	}
	return fmt.Errorf("%s unpacked past the room it had on this node (%s) at %s and is not tried again until twice that is free on %s: "+
		"push a smaller artifact, or free space (or remove %s to try at once): %s",
		digest, printable.HumanBytes(r.Limit), r.At.UTC().Format(time.RFC3339), d.state, d.dir.Refused(), r.Reason)
}

// refuse records that digest unpacked past limit bytes.
func (d *Driver) refuse(name, digest string, limit int64, cause error) error {
	all, err := d.refusals()
	if _, newer := errors.AsType[*statedir.NewerError](err); newer {
		return err // a newer tend's record is not written over
	} else if err != nil {
		all = map[string]refusal{}
	}
	all[digest] = refusal{Model: name, Limit: limit, Reason: cause.Error(), At: d.now().UTC()}
	return statedir.WriteJSON(string(d.dir), statedir.RefusedFile, all, 0o644)
}
