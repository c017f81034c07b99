package model

import (
	"context"
	"errors"
	"io/fs"

	"github.com/tend-dev/tend/planner"
)

// Undo notes where the model's link points: the undo points it there
// again (that version is kept until the plan has held), or removes the
// link the action creates.
func (d *Driver) Undo(_ context.Context, a planner.Action, s any) (func(context.Context) error, error) {
	if a.Type == planner.Delete {
		return nil, nil // a removed model is pulled again by the next tick
	}
	m, err := spec(a.Resource, s)
	if err != nil {
		return nil, err
	}
	rec, err := d.record(m.Name)
	if err != nil {
		return nil, err
	}
	var before *record
	if rec != nil {
		c := *rec
		c.Versions = append([]version(nil), rec.Versions...)
		before = &c
	}
	dir, rel, err := d.linkDir(m.Name, m.Path, false)
	target := ""
	if err == nil {
		target, _ = dir.Readlink(rel)
		_ = dir.Close()
	}
	return func(context.Context) error {
		dir, rel, err := d.linkDir(m.Name, m.Path, true)
		if err != nil {
			return err
		}
		defer dir.Close()
		if target == "" {
			if err := dir.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		} else if err := swapLink(dir, rel, target); err != nil {
			return err
		}
		if before == nil {
			return nil
		}
		// Keep the versions pulled since: a retry needs no download.
		cur, err := d.record(m.Name)
		if err == nil && cur != nil {
			for _, v := range cur.Versions {
				if before.version(v.Dir) == nil {
					before.Versions = append(before.Versions, v)
				}
			}
		}
		return d.setRecord(before)
	}, nil
}
