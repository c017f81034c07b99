package agent

import (
	"context"
	"log/slog"
	"os"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/applier/file"
	"github.com/tend-dev/tend/applier/model"
	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/applier/service/container"
	"github.com/tend-dev/tend/internal/confine"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci"
	"github.com/tend-dev/tend/render"
)

// CgroupParent is the cgroup under which every service instance gets its
// own.
const CgroupParent = "tend"

// node is the applier of one tick and the drivers it works through.
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

// openNode makes the drivers for c's node (services run through sup, or a
// supervisor that starts them detached when sup is nil; model pulls shown
// on meter when it is not nil) and the applier that is handed them.
func openNode(c *manifest.AgentConfig, sup *service.Supervisor, meter oci.Meter, log *slog.Logger) (*node, error) {
	tree, err := confine.New(c.Root, c.AllowPaths)
	if err != nil {
		return nil, err
	}
	mopts := ModelOptions(c)
	mopts.Meter = meter
	models, err := model.New(c.StateDir, tree, mopts, log)
	if err != nil {
		return nil, err
	}
	if sup == nil {
		sup = NewSupervisor(c, log)
	}
	services := service.NewDriver(c.StateDir, sup, service.DriverOptions{Device: c.Device, Registry: mopts.Registry, KeepImages: mopts.KeepVersions})
	a, err := applier.New(applier.Config{Root: tree.Root(), StateDir: c.StateDir, Logger: log},
		file.New(tree), models, services)
	if err != nil {
		return nil, err
	}
	return &node{applier: a, models: models, services: services}, nil
}

// NewSupervisor returns the supervisor of c's services, running them as
// processes. It watches nothing until started.
func NewSupervisor(c *manifest.AgentConfig, log *slog.Logger) *service.Supervisor {
	return service.NewSupervisor(c.StateDir, service.Runtimes{Process: processRuntime(log), Container: ContainerRuntime(c)}, log)
}

// ContainerRuntime is the engine that runs c's container services
// (runtime.docker.host, else DOCKER_HOST, else Docker's socket), pulling
// with the credentials of registries.dockerConfig. It does not connect
// until a container is asked for. Nil when the address cannot be used (the
// config's validation refuses it first).
func ContainerRuntime(c *manifest.AgentConfig) service.Runtime {
	rt, err := container.New(container.Options{Host: c.DockerHost(os.Getenv), Keychain: oci.Keychain(c.Registries.DockerConfig)})
	if err != nil {
		return nil
	}
	return rt
}

// RegistryOptions say how to reach registries, from the agent config.
func RegistryOptions(c *manifest.AgentConfig) oci.Options {
	return oci.Options{Insecure: c.Registries.Insecure, Keychain: oci.Keychain(c.Registries.DockerConfig)}
}

// ModelOptions are the model driver's options from the agent config.
func ModelOptions(c *manifest.AgentConfig) model.Options {
	o := model.Options{
		Registry:       RegistryOptions(c),
		VerifyInterval: c.Models.VerifyInterval.D(),
		Parallel:       c.Models.Parallel,
		KeepVersions:   manifest.DefaultKeepVersions,
	}
	if c.Models.KeepVersions != nil {
		o.KeepVersions = *c.Models.KeepVersions
	}
	return o
}
