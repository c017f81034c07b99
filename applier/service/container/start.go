package container

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/prometheus/procfs"

	"github.com/tend-dev/tend/applier/service"
)

// Log rotation of the engine's json-file driver, per container.
const (
	logMaxSize  = "10m"
	logMaxFiles = "3"
)

// Run creates and starts a container for in (the runtime's Start, on
// its own types): the image pulled first if
// the engine lacks it, restart policy "no" (tend restarts it), the host's
// network unless in.Network says otherwise, in's memory (memory and swap
// together) and CPU limits, environment, user, working directory, bind
// mounts, devices and labels, and logs kept by the engine (json-file,
// rotated at 10 MB, 3 files).
//
// A missing image, device or mount source, or a container the engine
// refuses to create (a memory limit below its minimum, say) is a
// service.ErrInvalidInstance error, returned before anything runs. A
// container of the same name left by an earlier start is removed first,
// and so are the containers labelled as the same replica under another
// invocation that run or were created (see stopLeftovers).
func (r *Runtime) Run(ctx context.Context, in Instance) (Proc, error) {
	cfg, host, err := r.spec(in)
	if err != nil {
		return Proc{}, err
	}
	if err := r.ensureImage(ctx, in); err != nil {
		return Proc{}, err
	}
	name := Name(in)
	if in.Invocation != "" {
		left, err := r.stopLeftovers(ctx, in)
		for _, id := range left {
			r.log.WarnContext(ctx, "stopped a leftover container of this replica that no record names", "service", in.Service,
				"replica", in.Replica, "container", short(id))
		}
		if err != nil {
			return Proc{}, err
		}
	}
	if err := r.removeStale(ctx, name); err != nil {
		return Proc{}, err
	}
	created, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: host})
	if err != nil {
		if cerrdefs.IsInvalidArgument(err) {
			return Proc{}, service.Invalidf("service %s: the engine refused its container: %v (check image, resources.memory, devices and mounts)", in.Service, err)
		}
		return Proc{}, r.engineError(fmt.Errorf("service %s: create container %s: %w", in.Service, name, err))
	}
	started := time.Now()
	if _, err := r.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		_ = r.remove(context.WithoutCancel(ctx), created.ID)
		if cerrdefs.IsInvalidArgument(err) || cerrdefs.IsNotFound(err) {
			return Proc{}, service.Invalidf("service %s: the engine could not start its container from %s: %v", in.Service, in.Image, err)
		}
		if in.GPUs != "" && strings.Contains(err.Error(), "could not select device driver") {
			return Proc{}, service.Invalidf("service %s: gpus %s: the engine has no NVIDIA runtime (%v): install the NVIDIA Container Toolkit on the device, or remove gpus from the manifest", in.Service, in.GPUs, err)
		}
		return Proc{}, r.engineError(fmt.Errorf("service %s: start container %s: %w", in.Service, name, err))
	}
	p, err := r.Proc(ctx, created.ID)
	if err != nil {
		// Not recorded, so not left running: nothing would stop it.
		_ = r.remove(context.WithoutCancel(ctx), created.ID)
		return Proc{}, fmt.Errorf("service %s: %w", in.Service, err)
	}
	p.Limits, p.Started = strings.Join(created.Warnings, "; "), started
	return p, nil
}

// Proc is the running container id as a Proc (its main pid and
// that process's start time), for a container found by List and adopted.
// A container that is not running has PID 0.
func (r *Runtime) Proc(ctx context.Context, id string) (Proc, error) {
	res, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return Proc{}, r.engineError(fmt.Errorf("inspect container %s: %w", short(id), err))
	}
	p := Proc{Container: res.Container.ID}
	if st := res.Container.State; st != nil && st.Running {
		p.PID = st.Pid
		p.StartTime = startTime(st.Pid)
	}
	return p, nil
}

// minMemory is the lowest memory limit Docker's engine accepts.
const minMemory = 6 << 20

// Check reports, asking the engine nothing, whether in can run on this
// node as declared: its network, device nodes and memory limit, and that
// no mount source that exists leads out of allowPaths (the others are
// checked at the start). A plan checks every instance it starts before it
// stops anything.
func (r *Runtime) Check(in Instance) error {
	// Missing mount sources are not refused: a file or model the same
	// plan declares is there only once its action ran, before the start.
	if r.confine != nil {
		if err := r.confine.checkExisting(in.Service, in.Mounts); err != nil {
			return err
		}
	}
	in.Mounts = nil
	_, _, err := r.spec(in)
	return err
}

// entrypoint is the container's entrypoint: nil (the image's) unless
// command names one; an empty list would clear the image's.
func entrypoint(command []string) []string {
	if len(command) == 0 {
		return nil
	}
	return command
}

// spec is the container's configuration, after checking what can be
// checked on this node: the network mode, device paths, mount sources.
func (r *Runtime) spec(in Instance) (*container.Config, *container.HostConfig, error) {
	if in.Image == "" {
		return nil, nil, service.Invalidf("service %s: no image to run: set image in the manifest", in.Service)
	}
	network := in.Network
	switch network {
	case "":
		network = "host"
	case "host", "none", "bridge":
	default:
		return nil, nil, service.Invalidf("service %s: network %q: use host, none or bridge", in.Service, in.Network)
	}
	labels := maps.Clone(in.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelReplica] = replicaLabel(in.Replica)
	if in.Invocation != "" {
		labels[LabelInvocation] = in.Invocation
	}
	env := make([]string, 0, len(in.Env)+1)
	for _, k := range slices.Sorted(maps.Keys(in.Env)) {
		env = append(env, k+"="+in.Env[k])
	}
	if in.Invocation != "" {
		env = append(env, service.InvocationEnv+"="+in.Invocation)
	}
	user := in.User
	if in.Group != "" {
		user += ":" + in.Group
	}
	cfg := &container.Config{
		Image:      in.Image,
		Cmd:        in.Args,
		Entrypoint: entrypoint(in.Command),
		Env:        env,
		User:       user,
		WorkingDir: in.WorkingDir,
		Labels:     labels,
	}
	host := &container.HostConfig{
		NetworkMode:   container.NetworkMode(network),
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		LogConfig:     container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": logMaxSize, "max-file": logMaxFiles}},
	}
	// The limit holds for memory and swap together, as for a process:
	// the engine's default would let the container swap as much again.
	if in.Memory > 0 && in.Memory < minMemory {
		return nil, nil, service.Invalidf("service %s: resources.memory %s is below the engine's minimum, %s: raise it", in.Service, service.FormatBytes(in.Memory), service.FormatBytes(minMemory))
	}
	host.Memory = in.Memory
	if in.Memory > 0 {
		host.MemorySwap = in.Memory
	}
	host.NanoCPUs = in.CPUMilli * 1_000_000
	for _, m := range in.Mounts {
		source := m.Source
		if r.confine != nil {
			// The path the link leads to is what the engine mounts: what
			// was checked is what the container gets.
			var err error
			if source, err = r.confine.mountSource(in.Service, m.Source); err != nil {
				return nil, nil, err
			}
		} else if _, err := os.Stat(m.Source); err != nil {
			return nil, nil, service.Invalidf("service %s: mount source %s: %v: create it, or fix mounts in the manifest", in.Service, m.Source, unwrapPath(err))
		}
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	for _, d := range in.Devices {
		dm, err := device(d)
		if err != nil {
			return nil, nil, service.Invalidf("service %s: device %q: %v", in.Service, d, err)
		}
		if _, err := os.Stat(dm.PathOnHost); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil, service.Invalidf("service %s: device %s does not exist on this node: attach it, or remove it from devices in the manifest", in.Service, dm.PathOnHost)
			}
			return nil, nil, service.Invalidf("service %s: device %s: %v", in.Service, dm.PathOnHost, unwrapPath(err))
		}
		host.Devices = append(host.Devices, dm)
	}
	if in.GPUs != "" {
		// As docker run --gpus: the NVIDIA runtime's device request.
		count := -1
		if in.GPUs != "all" {
			n, err := strconv.Atoi(in.GPUs)
			if err != nil || n < 1 {
				return nil, nil, service.Invalidf("service %s: gpus %q: use all or a count such as 1", in.Service, in.GPUs)
			}
			count = n
		}
		host.DeviceRequests = []container.DeviceRequest{{Driver: "nvidia", Count: count, Capabilities: [][]string{{"gpu"}}}}
	}
	return cfg, host, nil
}

// device parses HOST[:CONTAINER[:PERMISSIONS]], as docker run --device.
func device(s string) (container.DeviceMapping, error) {
	parts := strings.Split(s, ":")
	d := container.DeviceMapping{PathOnHost: parts[0], PathInContainer: parts[0], CgroupPermissions: "rwm"}
	switch len(parts) {
	case 3:
		d.CgroupPermissions = parts[2]
		if strings.Trim(d.CgroupPermissions, "rwm") != "" {
			return d, fmt.Errorf("permissions %q: use letters of rwm", parts[2])
		}
		fallthrough
	case 2:
		d.PathInContainer = parts[1]
	case 1:
	default:
		return d, errors.New("use HOST[:CONTAINER[:PERMISSIONS]]")
	}
	if !strings.HasPrefix(d.PathOnHost, "/") || !strings.HasPrefix(d.PathInContainer, "/") {
		return d, errors.New("paths must be absolute")
	}
	return d, nil
}

// unwrapPath drops the path an *fs.PathError repeats.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// nameChars are what the engine accepts in a container name.
var nameChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// Name is the name of in's container: tend-DEVICE-SERVICE-REPLICA (the
// device from its dev.tend.device label; tend-SERVICE-REPLICA without
// one), characters the engine refuses replaced by "_".
func Name(in Instance) string {
	parts := []string{"tend"}
	if d := in.Labels[LabelDevice]; d != "" {
		parts = append(parts, d)
	}
	parts = append(parts, in.Service, replicaLabel(in.Replica))
	return nameChars.ReplaceAllString(strings.Join(parts, "-"), "_")
}

// removeStale removes a container of that name left by an earlier start of
// the instance (exited, or orphaned by a tend that died while starting it).
// One that tend did not create (no dev.tend.replica label) is left alone:
// the create then fails and names it.
func (r *Runtime) removeStale(ctx context.Context, name string) error {
	res, err := r.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return r.engineError(fmt.Errorf("inspect container %s: %w", name, err))
	}
	if res.Container.Config == nil || res.Container.Config.Labels[LabelReplica] == "" {
		return service.Invalidf("a container named %s exists that tend did not create: rename or remove it (docker rm %s)", name, name)
	}
	return r.remove(ctx, res.Container.ID)
}

// startTime is field 22 of /proc/PID/stat, 0 when it cannot be read (the
// engine on another host, or in another pid namespace).
func startTime(pid int) uint64 {
	if pid <= 0 {
		return 0
	}
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0
	}
	return st.Starttime
}
