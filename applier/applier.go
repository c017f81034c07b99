package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// Config configures an Applier.
type Config struct {
	Root     string // absolute prefix under which every managed path is placed; the inventory is bound to it
	StateDir string // where the inventory and the lock live
	Logger   *slog.Logger
	// Now is the clock of the inventory's appliedAt; nil means time.Now.
	Now func() time.Time
}

// Applier observes the node and applies plans to it through its drivers,
// keeping the inventory in StateDir. Callers hold Lock on StateDir around
// Observe and Apply. An Applier reads the inventory once a tick (see
// Begin).
type Applier struct {
	root     string
	stateDir string
	logger   *slog.Logger
	drivers  map[planner.Kind]Driver
	now      func() time.Time

	mu     sync.Mutex
	loaded *Inventory // read once, until Apply
}

// Result says what an Apply did.
type Result struct {
	Applied []planner.Action // the actions that succeeded, in order
	Failed  *planner.Action  // the action that failed; nil if none did
	// Downloaded is the bytes pulled from registries, manifests included,
	// by the drivers in this tick (its render, plan and apply).
	Downloaded int64
	// RolledBack lists the resources put back when the plan was rolled
	// back (see RollbackError).
	RolledBack []string
	// Skipped lists the actions left out because they will fail or are
	// held (see planner.Action.Skipped).
	Skipped []planner.Action
}

// New returns an Applier that works through drivers, one per kind.
func New(cfg Config, drivers ...Driver) (*Applier, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("applier: stateDir is empty")
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil || cfg.Root == "" {
		return nil, fmt.Errorf("applier: root %q must be an absolute path", cfg.Root)
	}
	a := &Applier{root: root, stateDir: cfg.StateDir, logger: cfg.Logger, now: cfg.Now, drivers: map[planner.Kind]Driver{}}
	if a.logger == nil {
		a.logger = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	for _, d := range drivers {
		if _, dup := a.drivers[d.Kind()]; dup {
			return nil, fmt.Errorf("applier: two drivers for %s resources", d.Kind())
		}
		a.drivers[d.Kind()] = d
	}
	return a, nil
}

// Observe loads the inventory and asks the drivers about every desired or
// managed id. An inventory written for another root, or for a device other
// than d's, is an error wrapping ErrInventoryMismatch: its resources are not
// this node's to prune.
func (a *Applier) Observe(ctx context.Context, d *render.Desired) (planner.Observed, error) {
	inv, err := a.loadInventory(d.Device)
	if err != nil {
		return planner.Observed{}, err
	}
	obs := planner.Observed{
		Resources: make(map[string]planner.State, len(d.Resources)+len(inv.Resources)),
		Applied:   inv.Applied(),
		Created:   inv.Created(),
	}
	observe := func(id string, kind planner.Kind) error {
		if _, done := obs.Resources[id]; done {
			return nil
		}
		drv, ok := a.drivers[kind]
		if !ok {
			return fmt.Errorf("observe %s: this tend has no driver for %s resources", id, kind)
		}
		st, err := drv.Observe(ctx, id, d.Specs[id])
		if err != nil {
			return fmt.Errorf("observe %s: %w", id, err)
		}
		obs.Resources[id] = st
		return nil
	}
	for _, r := range d.Resources {
		if err := observe(r.ID, r.Kind); err != nil {
			return planner.Observed{}, err
		}
	}
	for _, id := range sortedKeys(inv.Resources) {
		kind, err := planner.KindOf(id)
		if err != nil {
			return planner.Observed{}, fmt.Errorf("observe %s: inventory %s: %w", id, statedir.InventoryFile, err)
		}
		if err := observe(id, kind); err != nil {
			return planner.Observed{}, err
		}
	}
	return obs, nil
}

// Inventory returns the inventory in stateDir. It is read once a tick
// (see Begin): the source's rewind check, Observe, Apply and what reads it
// after Apply share the copy, which Apply keeps as it saved it, or drops
// when the save failed.
func (a *Applier) Inventory() (*Inventory, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.loaded == nil {
		inv, err := LoadInventory(a.stateDir)
		if err != nil {
			return nil, err
		}
		a.loaded = inv
	}
	return a.loaded, nil
}

// loadInventory returns the inventory and checks that it belongs to this
// applier's root and to device.
func (a *Applier) loadInventory(device string) (*Inventory, error) {
	inv, err := a.Inventory()
	if err != nil {
		return nil, err
	}
	if err := inv.check(a.stateDir, a.root, device); err != nil {
		return nil, err
	}
	return inv, nil
}

// downloaded adds up what the drivers pulled.
func (a *Applier) downloaded() int64 {
	var n int64
	for _, d := range a.drivers {
		if dl, ok := d.(Downloader); ok {
			n += dl.Downloaded()
		}
	}
	return n
}

// sortedKinds returns the kinds of the drivers, in plan order.
func (a *Applier) sortedKinds() []planner.Kind {
	return slices.Sorted(maps.Keys(a.drivers))
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
