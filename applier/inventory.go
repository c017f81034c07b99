package applier

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/internal/atomicfile"
	"github.com/tend-dev/tend/internal/failpoint"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/planner"
)

// Inventory records every resource tend manages on the node, with the fields
// it had when tend last applied it, and the last revision applied in full.
// Only resources in the inventory that tend created are ever pruned.
//
// An inventory belongs to one device and one root: Device and Root, once
// set, must match the applier that loads it.
type Inventory struct {
	Device    string
	Root      string    // the absolute root the resources are placed under
	Revision  string    // the last revision applied in full; "" before the first
	AppliedAt time.Time // when Revision was applied
	// Release is the key of the release last taken in full (see
	// ReleaseOf), and Declaration the declarations it was rendered from
	// (render.Desired.Declaration); "" when a tend that kept neither
	// applied it.
	Release     api.ReleaseKey
	Declaration string
	// Pending is the key of a release an apply began and did not apply
	// in full (an action failed, or was held); "" once one applies in
	// full.
	Pending   api.ReleaseKey
	Resources map[string]InventoryEntry
}

// AppliedRelease is the key of the release the node runs: Release, or,
// from an inventory that keeps none, the applied commit's; "" before the
// first apply.
func (inv *Inventory) AppliedRelease() api.ReleaseKey {
	if inv.Release != "" || inv.Revision == "" {
		return inv.Release
	}
	return api.RevisionRelease(inv.Revision)
}

// InventoryEntry is one managed resource.
type InventoryEntry struct {
	Fields []planner.Field `json:"fields"`
	// Created is true when tend created the resource: nothing was at its
	// place on the node. A resource that was there before tend adopted it
	// is never deleted, only forgotten.
	Created bool `json:"created,omitempty"`
	// Sensitive is true when the content tend last applied was declared
	// sensitive: what is on the node is hidden too, even once a commit
	// no longer says so.
	Sensitive bool `json:"sensitive,omitempty"`
}

// inventoryJSON is the file's layout, after the formatVersion of
// stateDir's format (statedir.Encode writes it, statedir.Decode checks it;
// format 1 had "1" there too).
type inventoryJSON struct {
	Device    string `json:"device"`
	Root      string `json:"root,omitempty"`
	Revision  string `json:"revision"`
	AppliedAt string `json:"appliedAt,omitempty"` // RFC 3339
	// Release and Declaration are optional: a tend of the same format
	// that knows neither reads the file and drops them when it saves.
	Release     string                    `json:"release,omitempty"`
	Declaration string                    `json:"declaration,omitempty"`
	Pending     string                    `json:"pending,omitempty"`
	Resources   map[string]InventoryEntry `json:"resources"`
}

// LoadInventory reads the inventory in stateDir. A missing file is an empty
// inventory: tend manages nothing yet.
func LoadInventory(stateDir string) (*Inventory, error) {
	name := statedir.Dir(stateDir).Inventory()
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return &Inventory{Resources: map[string]InventoryEntry{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	var raw inventoryJSON
	if err := statedir.Decode(name, data, &raw); err != nil {
		if _, newer := errors.AsType[*statedir.NewerError](err); newer {
			return nil, err
		}
		return nil, corrupt(name, err)
	}
	inv := &Inventory{Device: raw.Device, Root: raw.Root, Revision: raw.Revision, Resources: raw.Resources,
		Release: api.ReleaseKey(raw.Release), Declaration: raw.Declaration, Pending: api.ReleaseKey(raw.Pending)}
	if raw.AppliedAt != "" {
		if inv.AppliedAt, err = time.Parse(time.RFC3339, raw.AppliedAt); err != nil {
			return nil, corrupt(name, fmt.Errorf("appliedAt: %w", err))
		}
	}
	if inv.Resources == nil {
		inv.Resources = map[string]InventoryEntry{}
	}
	return inv, nil
}

func corrupt(name string, err error) error {
	return fmt.Errorf("%w %s: %w; tend cannot tell which resources it manages: restore the file from a backup, "+
		"or move it aside, after which tend adopts the declared resources on the next apply "+
		"and forgets (never deletes) the others it created", ErrCorruptInventory, name, err)
}

// Save writes the inventory to stateDir atomically (temporary file, fsync,
// rename, fsync of stateDir), creating stateDir (statedir.Mode) if needed.
func (inv *Inventory) Save(stateDir string) error {
	raw := inventoryJSON{
		Device:      inv.Device,
		Root:        inv.Root,
		Revision:    inv.Revision,
		Release:     inv.Release.String(),
		Declaration: inv.Declaration,
		Pending:     inv.Pending.String(),
		Resources:   inv.Resources,
	}
	if raw.Resources == nil {
		raw.Resources = map[string]InventoryEntry{}
	}
	if !inv.AppliedAt.IsZero() {
		raw.AppliedAt = inv.AppliedAt.UTC().Format(time.RFC3339)
	}
	data, err := statedir.Encode(statedir.InventoryFile, raw)
	if err != nil {
		return fmt.Errorf("encode inventory: %w", err)
	}
	failpoint.Hit("inventory:save")
	if err := os.MkdirAll(stateDir, statedir.Mode); err != nil {
		return fmt.Errorf("save inventory: %w", err)
	}
	r, err := os.OpenRoot(stateDir)
	if err != nil {
		return fmt.Errorf("save inventory: %w", err)
	}
	defer r.Close()
	if err := atomicfile.WriteIn(r, statedir.InventoryFile, data, 0o600); err != nil {
		return fmt.Errorf("save inventory %s: %w", statedir.Dir(stateDir).Inventory(), err)
	}
	return nil
}

// Applied returns the fields of every managed resource, as the planner's
// Observed.Applied wants them.
func (inv *Inventory) Applied() map[string][]planner.Field {
	out := make(map[string][]planner.Field, len(inv.Resources))
	for id, e := range inv.Resources {
		out[id] = slices.Clone(e.Fields)
	}
	return out
}

// Created returns the managed resources tend created, as the planner's
// Observed.Created wants them.
func (inv *Inventory) Created() map[string]bool {
	out := make(map[string]bool, len(inv.Resources))
	for id, e := range inv.Resources {
		if e.Created {
			out[id] = true
		}
	}
	return out
}

// check returns an error wrapping ErrInventoryMismatch when the inventory,
// loaded from stateDir, was written for another root or device.
func (inv *Inventory) check(stateDir, root, device string) error {
	var what, was, now string
	switch {
	case inv.Root != "" && inv.Root != root:
		what, was, now = "root", inv.Root, "root is now "+root
	case inv.Device != "" && inv.Device != device:
		what, was, now = "device", inv.Device, "this is "+device
	default:
		return nil
	}
	return fmt.Errorf("%w: stateDir %s holds the inventory of %s %s, but %s: use one stateDir per %s, "+
		"or move %s aside to start over (tend then forgets, and never deletes, what it created before)",
		ErrInventoryMismatch, stateDir, what, was, now, what, statedir.Dir(stateDir).Inventory())
}
