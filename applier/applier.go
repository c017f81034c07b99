package applier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// Config configures an Applier.
type Config struct {
	Root       string   // prefix under which every managed path is placed
	StateDir   string   // where the inventory and the lock live
	AllowPaths []string // the only paths (under Root) tend may write
	Models     ModelOptions
	// Supervisor runs services; nil means one that starts them detached
	// and does not watch them (a one-shot apply).
	Supervisor *Supervisor
	Logger     *slog.Logger
}

// Applier observes the node and applies plans to it, keeping the inventory
// in StateDir. Callers hold Lock on StateDir around Observe and Apply.
type Applier struct {
	stateDir string
	logger   *slog.Logger
	files    *FileDriver
	models   *ModelDriver
	services *ServiceDriver
	drivers  map[planner.Kind]Driver
	now      func() time.Time

	mu    sync.Mutex
	specs map[string]any // manifest item by resource id, from Desired

	loaded *Inventory // read once per tick (an Applier is made per tick), until Apply
}

// Result says what an Apply did.
type Result struct {
	Applied []planner.Action // the actions that succeeded, in order
	Failed  *planner.Action  // the action that failed; nil if none did
	// Downloaded is the bytes pulled from registries, manifests included,
	// by this Applier (its plan and its apply).
	Downloaded int64
	// RolledBack lists the resources put back when the plan was rolled
	// back (see RollbackError).
	RolledBack []string
}

// New returns an Applier with a driver for every kind tend manages so far.
func New(cfg Config) (*Applier, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("applier: stateDir is empty")
	}
	files, err := NewFileDriver(cfg.Root, cfg.AllowPaths)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	models, err := NewModelDriver(cfg.StateDir, files, cfg.Models, logger)
	if err != nil {
		return nil, err
	}
	sup := cfg.Supervisor
	if sup == nil {
		sup = NewSupervisor(cfg.StateDir, service.NewExec(CgroupParent, logger), logger)
	}
	services := NewServiceDriver(cfg.StateDir, sup)
	return &Applier{
		stateDir: cfg.StateDir,
		logger:   logger,
		files:    files,
		models:   models,
		services: services,
		drivers:  map[planner.Kind]Driver{files.Kind(): files, models.Kind(): models, services.Kind(): services},
		now:      time.Now,
		specs:    map[string]any{},
	}, nil
}

// Desired turns a device into planner resources and remembers each spec by
// id for Apply. Models are resolved in their registries (see
// ModelDriver.Resolve); services have every ${model:…}, ${file:…} and
// ${replica} expanded.
func (a *Applier) Desired(ctx context.Context, dev *manifest.Device, revision string) (planner.Desired, error) {
	if dev == nil {
		return planner.Desired{}, errors.New("desired state: no device")
	}
	d := planner.Desired{Device: dev.Metadata.Name, Revision: revision}
	specs := make(map[string]any, len(dev.Spec.Files)+len(dev.Spec.Models))
	for _, m := range dev.Spec.Models {
		r, err := a.models.Resolve(ctx, m)
		if err == nil && m.Path != "" {
			if perr := checkPath(m.Path); perr != nil {
				err = perr
			} else {
				_, _, err = a.files.locate(FileID(m.Path))
			}
		}
		if err != nil {
			return planner.Desired{}, fmt.Errorf("%s%s: %w", ModelID(m.Name), origin(m.Origin), err)
		}
		specs[r.ID] = m
		d.Resources = append(d.Resources, r)
	}
	for _, f := range dev.Spec.Files {
		r, err := fileResource(f)
		if perr := checkPath(f.Path); perr != nil {
			err = perr
		} else if err == nil {
			_, _, err = a.files.locate(r.ID)
		}
		if err == nil && specs[r.ID] != nil {
			err = errors.New("declared twice")
		}
		if err != nil {
			name := r.ID
			if !strings.HasPrefix(f.Path, "/") {
				name = "file " + strconv.Quote(f.Path)
			}
			return planner.Desired{}, fmt.Errorf("%s%s: %w", name, origin(f.Origin), err)
		}
		specs[r.ID] = f
		d.Resources = append(d.Resources, r)
	}
	models := make(map[string]manifest.Model, len(dev.Spec.Models))
	for _, m := range dev.Spec.Models {
		models[m.Name] = m
	}
	refs := func(ref string) string {
		kind, target, _ := strings.Cut(ref, ":")
		switch kind {
		case "model":
			return a.models.StablePath(models[target])
		case "file":
			return a.files.nodePath(target)
		}
		return "${" + ref + "}"
	}
	for _, s := range dev.Spec.Services {
		r, err := a.services.Resource(s, refs)
		if err == nil && specs[r.ID] != nil {
			err = errors.New("declared twice")
		}
		if err != nil {
			return planner.Desired{}, fmt.Errorf("%s%s: %w", ServiceID(s.Name), origin(s.Origin), err)
		}
		specs[r.ID] = s
		d.Resources = append(d.Resources, r)
	}
	a.mu.Lock()
	a.specs = specs
	a.mu.Unlock()
	return d, nil
}

// CgroupParent is the cgroup under which every service instance gets its
// own.
const CgroupParent = "tend"

// Held returns why models were held at their active version because their
// registry could not be asked, or nil: the tick did what it could and
// still failed to reach its target.
func (a *Applier) Held() error { return a.models.Held() }

// ModelPath returns the node path of a model's stable path, the symlink to
// its active version, as ${model:NAME} expands.
func (a *Applier) ModelPath(m manifest.Model) string { return a.models.StablePath(m) }

// origin formats where a resource was declared, for messages.
func origin(o manifest.Origin) string {
	if o.File == "" {
		return ""
	}
	s := " (" + o.File
	if l := o.Line(""); l > 0 {
		s += fmt.Sprintf(":%d", l)
	}
	if o.Field != "" {
		s += " " + o.Field
	}
	return s + ")"
}

// Observe loads the inventory and asks the drivers about every desired or
// managed id. An inventory written for another root, or for a device other
// than d's, is an error wrapping ErrInventoryMismatch: its resources are not
// this node's to prune.
func (a *Applier) Observe(ctx context.Context, d planner.Desired) (planner.Observed, error) {
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
		st, err := drv.Observe(ctx, id)
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
		kind, err := planner.ParseKind(id[:strings.IndexByte(id+"/", '/')])
		if err != nil {
			return planner.Observed{}, fmt.Errorf("observe %s: inventory %s: %w", id, InventoryFile, err)
		}
		if err := observe(id, kind); err != nil {
			return planner.Observed{}, err
		}
	}
	return obs, nil
}

// Inventory returns the inventory in stateDir. It is read once: the
// source's rewind check, Observe and Apply of one tick share the copy, and
// Apply drops it, so the next tick reads what Apply wrote.
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
	if err := inv.check(a.stateDir, a.files.root, device); err != nil {
		return nil, err
	}
	return inv, nil
}
