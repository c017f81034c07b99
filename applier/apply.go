package applier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/tend-dev/tend/planner"
)

// Apply executes the plan's actions in order (Create and Update with the
// spec Desired remembered, Delete with nil), stopping at the first error.
//
// The inventory is then updated for every action that succeeded: a created
// or updated resource is recorded with its desired fields, a deleted one is
// removed. A declared resource without an action is recorded with its
// desired fields (it matches the node); a managed one neither declared nor
// on the node is dropped; one whose action failed or was not reached keeps
// its entry. Only when every action succeeded do the inventory's Revision,
// Device and AppliedAt move to d. The inventory is saved atomically in every
// case.
func (a *Applier) Apply(ctx context.Context, d planner.Desired, cs *planner.Changeset) (Result, error) {
	if cs == nil {
		return Result{}, errors.New("apply: no plan")
	}
	inv, err := LoadInventory(a.stateDir)
	if err != nil {
		return Result{}, err
	}
	before := fingerprint(inv)
	a.mu.Lock()
	specs := a.specs
	a.mu.Unlock()

	// pending holds the ids whose action has not succeeded (yet).
	pending := make(map[string]bool, len(cs.Actions))
	for _, act := range cs.Actions {
		pending[act.Resource] = true
	}
	var res Result
	var applyErr error
	for _, act := range cs.Actions {
		if err := ctx.Err(); err != nil {
			applyErr = fmt.Errorf("apply stopped before %s: %w", act.Resource, err)
			break
		}
		if err := a.applyOne(ctx, act, specs); err != nil {
			failed := act
			res.Failed = &failed
			applyErr = fmt.Errorf("apply %s: %w", act.Resource, err)
			break
		}
		delete(pending, act.Resource)
		res.Applied = append(res.Applied, act)
		attrs := []slog.Attr{
			slog.String(logKeyResource, act.Resource),
			slog.String(logKeyAction, act.Type.String()),
			slog.String(logKeyReason, act.Reason),
		}
		if act.Drift {
			attrs = append(attrs, slog.Bool(logKeyDrift, true))
		}
		a.logger.LogAttrs(ctx, slog.LevelInfo, "applied", attrs...)
	}

	declared := make(map[string]bool, len(d.Resources))
	for _, r := range d.Resources {
		declared[r.ID] = true
		if !pending[r.ID] {
			inv.Resources[r.ID] = InventoryEntry{Fields: slices.Clone(r.Fields)}
		}
	}
	for _, id := range sortedKeys(inv.Resources) {
		if !declared[id] && !pending[id] {
			delete(inv.Resources, id) // deleted, or not on the node anymore
		}
	}
	if applyErr == nil {
		inv.Device, inv.Revision = d.Device, d.Revision
	}
	if len(res.Applied) == 0 && applyErr == nil && fingerprint(inv) == before {
		// A no-op tick writes nothing: flash storage on a device polled
		// every 30s should not take an fsynced write per tick.
		return res, nil
	}
	if applyErr == nil {
		inv.AppliedAt = a.now()
	}
	if err := inv.Save(a.stateDir); err != nil {
		return res, errors.Join(applyErr, err)
	}
	return res, applyErr
}

func (a *Applier) applyOne(ctx context.Context, act planner.Action, specs map[string]any) error {
	drv, ok := a.drivers[act.Kind]
	if !ok {
		return fmt.Errorf("this tend has no driver for %s resources", act.Kind)
	}
	var spec any
	if act.Type != planner.Delete {
		if spec = specs[act.Resource]; spec == nil && act.Type != planner.Restart {
			return errors.New("no declaration for it: call Desired before Apply with the same device")
		}
	}
	return drv.Apply(ctx, act, spec)
}

// fingerprint is what a save would change, AppliedAt aside.
func fingerprint(inv *Inventory) string {
	b, _ := json.Marshal(struct {
		Device, Revision string
		Resources        map[string]InventoryEntry
	}{inv.Device, inv.Revision, inv.Resources})
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
