package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/applier/file"
	"github.com/tend-dev/tend/applier/model"
	"github.com/tend-dev/tend/applier/service"
	_ "github.com/tend-dev/tend/applier/service/process" // registers the process runtime
	"github.com/tend-dev/tend/config"
	"github.com/tend-dev/tend/internal/confine"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/oci/verify"
	"github.com/tend-dev/tend/render"
)

// CgroupParent is the cgroup under which every service instance gets its
// own.
const CgroupParent = "tend"

// node is the applier and the drivers it works through, kept from tick to
// tick (see nodeCache).
type node struct {
	applier  *applier.Applier
	models   *model.Driver   // also render's resolver of models
	services *service.Driver // and of container images
}

// resolver pins models through the model driver and container images
// through the service driver, against what each last applied.
func (n *node) resolver() render.Resolver { return nodeResolver{n.models, n.services} }

type nodeResolver struct {
	*model.Driver
	images *service.Driver
}

func (r nodeResolver) ResolveImage(ctx context.Context, service, ref string) (render.Resolution, error) {
	return r.images.ResolveImage(ctx, service, ref)
}

func (r nodeResolver) ResolveServiceImage(ctx context.Context, s manifest.Service) (render.Resolution, error) {
	return r.images.ResolveServiceImage(ctx, s)
}

// nodeCache keeps a Reconciler's node: its drivers and applier are made
// once, by the first tick, and serve every later one, each of which
// begins by having them forget what the last one read (applier.Begin). A
// tick that cannot open the node fails, and the next one tries again; a
// new supervisor (an agent started again) makes a new node.
type nodeCache struct {
	mu   sync.Mutex
	node *node
	sup  *service.Supervisor // the one node was opened with
}

// open returns the node, opening it the first time, and begins a tick.
func (nc *nodeCache) open(c *manifest.AgentConfig, sup *service.Supervisor, meter transport.Meter, ver *verify.Verifier, now func() time.Time, log *slog.Logger) (*node, error) {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	if nc.node == nil || nc.sup != sup {
		n, err := openNode(c, sup, meter, ver, now, log)
		if err != nil {
			nc.node, nc.sup = nil, nil // no node of another supervisor, or of a tick before, stays
			return nil, err
		}
		nc.node, nc.sup = n, sup
	}
	nc.node.applier.Begin()
	return nc.node, nil
}

// openNode makes the drivers for c's node (services run through sup, or a
// supervisor that starts them detached when sup is nil; model pulls shown
// on meter when it is not nil; signatures checked by ver) and the applier
// that is handed them, on the clock now.
func openNode(c *manifest.AgentConfig, sup *service.Supervisor, meter transport.Meter, ver *verify.Verifier, now func() time.Time, log *slog.Logger) (*node, error) {
	tree, err := confine.New(c.Root, c.AllowPaths)
	if err != nil {
		return nil, err
	}
	mopts := ModelOptions(c)
	mopts.Meter = meter
	mopts.Verifier = ver
	models, err := model.New(c.StateDir, tree, mopts, log)
	if err != nil {
		return nil, err
	}
	if sup == nil {
		sup = NewSupervisor(c, log)
	}
	services := service.NewDriver(c.StateDir, sup, service.DriverOptions{Device: c.Device, Registry: mopts.Registry, KeepImages: mopts.KeepVersions,
		Verify: c.Runtime.Verify, Verifier: ver})
	a, err := applier.New(applier.Config{Root: tree.Root(), StateDir: c.StateDir, Logger: log, Now: now},
		file.New(tree), models, services)
	if err != nil {
		return nil, err
	}
	return &node{applier: a, models: models, services: services}, nil
}

// NewSupervisor returns the supervisor of c's services, running each on
// the runtime of its kind. It watches nothing until started.
func NewSupervisor(c *manifest.AgentConfig, log *slog.Logger) *service.Supervisor {
	return service.NewSupervisor(c.StateDir, Runtimes(c, log), log)
}

// Runtimes are the runtimes of c's services, one of each registered kind
// (the process runtime; the container runtime on the engine at
// runtime.docker.host, else DOCKER_HOST, else Docker's socket, which it
// does not connect to until a container is asked for).
func Runtimes(c *manifest.AgentConfig, log *slog.Logger) *service.Runtimes {
	return service.Open(service.Config{Agent: c, CgroupParent: CgroupParent, Log: log})
}

// ModelOptions are the model driver's options from the agent config, its
// registry options config.RegistryOptions. They stay beside the node they
// open: config builds for CI too, and links no driver.
func ModelOptions(c *manifest.AgentConfig) model.Options {
	o := model.Options{
		Registry:       config.RegistryOptions(c),
		VerifyInterval: c.Models.VerifyInterval.D(),
		Parallel:       c.Models.Parallel,
		KeepVersions:   manifest.DefaultKeepVersions,
		Verify:         c.Models.Verify,
	}
	if c.Models.KeepVersions != nil {
		o.KeepVersions = *c.Models.KeepVersions
	}
	return o
}
