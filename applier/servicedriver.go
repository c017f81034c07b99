package applier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tend-dev/tend/applier/service"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/planner"
)

// Fields plans compare for a service: the hash of its expanded spec, and
// how many replicas run.
const (
	FieldSpec     = "spec"
	FieldReplicas = "replicas"
)

const servicePrefix = "service/"

// ServiceID returns the resource id of the service called name.
func ServiceID(name string) string { return servicePrefix + name }

// ServiceName returns the name in a service resource id.
func ServiceName(id string) string { return strings.TrimPrefix(id, servicePrefix) }

// DefaultStopTimeout is how long a stopping service has between SIGTERM
// and SIGKILL when its spec gives no stopTimeout.
const DefaultStopTimeout = 10 * time.Second

// Log files of services: capped, with this many rotated copies.
const (
	logMaxBytes = 10 << 20
	logKeep     = 3
)

// ServiceDriver starts, updates and stops the instances of services
// through a Supervisor. An update touches only the replicas whose spec
// differs or that are not running, and scaling starts or stops only the
// difference.
type ServiceDriver struct {
	sup   *Supervisor
	state string // stateDir

	mu     sync.Mutex
	wanted map[string]*wantedService
}

// wantedService is a declared service with every reference expanded.
type wantedService struct {
	spec      manifest.Service
	hash      string
	instances []service.Instance
	probes    []*service.Probe
}

// serviceRecord is what tend keeps about a service as a whole, beside the
// records of its instances: the spec and replica count last applied.
type serviceRecord struct {
	SpecHash string `json:"specHash"`
	Replicas int    `json:"replicas"`
}

var (
	_ Driver = (*ServiceDriver)(nil)
)

// NewServiceDriver returns a driver running services through sup.
func NewServiceDriver(stateDir string, sup *Supervisor) *ServiceDriver {
	return &ServiceDriver{sup: sup, state: stateDir, wanted: map[string]*wantedService{}}
}

// Kind returns planner.KindService.
func (d *ServiceDriver) Kind() planner.Kind { return planner.KindService }

// LogFile is where the output of one replica of a service goes.
func LogFile(stateDir, name string, replica int) string {
	return filepath.Join(stateDir, "logs", name, strconv.Itoa(replica)+".log")
}

// Resource expands s (refs gives the value of ${model:…} and ${file:…})
// and returns its planner resource.
func (d *ServiceDriver) Resource(s manifest.Service, refs func(ref string) string) (planner.Resource, error) {
	replicas := 1
	if s.Replicas != nil {
		replicas = *s.Replicas
	}
	if replicas < 0 {
		return planner.Resource{}, fmt.Errorf("replicas must be 0 or more, got %d", replicas)
	}
	keep := func(ref string) string {
		if ref == "replica" {
			return "${replica}"
		}
		return refs(ref)
	}
	tmpl := expandService(s, keep)
	b, _ := json.Marshal(struct {
		Command     []string
		Env         map[string]string
		WorkingDir  string
		User, Group string
		Restart     string
		Resources   *manifest.Resources
		Health      *manifest.Health
		StopTimeout manifest.Duration
	}{tmpl.Command, tmpl.Env, tmpl.WorkingDir, tmpl.User, tmpl.Group, tmpl.Restart, tmpl.Resources, tmpl.Health, tmpl.StopTimeout})
	sum := sha256.Sum256(b)
	w := &wantedService{spec: s, hash: "sha256:" + hex.EncodeToString(sum[:])}
	var memory, cpu int64
	if r := s.Resources; r != nil {
		var err error
		if r.Memory != "" {
			if memory, err = manifest.ParseMemory(r.Memory); err != nil {
				return planner.Resource{}, err
			}
		}
		if r.CPU != "" {
			if cpu, err = manifest.ParseCPU(r.CPU); err != nil {
				return planner.Resource{}, err
			}
		}
	}
	for i := range replicas {
		n := strconv.Itoa(i)
		e := expandService(tmpl, func(ref string) string {
			if ref == "replica" {
				return n
			}
			return "${" + ref + "}"
		})
		w.instances = append(w.instances, service.Instance{
			Service: s.Name, Replica: i, Command: e.Command, Env: e.Env, WorkingDir: e.WorkingDir,
			User: e.User, Group: e.Group, Memory: memory, CPUMilli: cpu, LogFile: LogFile(d.state, s.Name, i),
		})
		w.probes = append(w.probes, service.ProbeFrom(e.Health, func(s string) string { return s }))
	}
	d.mu.Lock()
	d.wanted[s.Name] = w
	d.mu.Unlock()
	return planner.Resource{
		ID: ServiceID(s.Name), Kind: planner.KindService, Deps: s.Deps(),
		Fields: []planner.Field{{Name: FieldSpec, Value: w.hash}, {Name: FieldReplicas, Value: strconv.Itoa(replicas)}},
	}, nil
}

// expandService returns s with every ${…} in its command, env, working
// directory and health probe replaced through value.
func expandService(s manifest.Service, value func(string) string) manifest.Service {
	out := s
	out.Command = make([]string, len(s.Command))
	for i, c := range s.Command {
		out.Command[i] = manifest.Expand(c, value)
	}
	if s.Env != nil {
		out.Env = make(map[string]string, len(s.Env))
		for k, v := range s.Env {
			out.Env[k] = manifest.Expand(v, value)
		}
	}
	out.WorkingDir = manifest.Expand(s.WorkingDir, value)
	if h := s.Health; h != nil {
		hc := *h
		hc.HTTP, hc.TCP = manifest.Expand(h.HTTP, value), manifest.Expand(h.TCP, value)
		hc.Exec = make([]string, len(h.Exec))
		for i, c := range h.Exec {
			hc.Exec[i] = manifest.Expand(c, value)
		}
		out.Health = &hc
	}
	return out
}

// Observe reports a service's spec hash (the one last applied, or that of
// a running instance started from another) and how many replicas run. An
// instance the supervisor is about to restart counts as running: the plan
// does not race its backoff.
func (d *ServiceDriver) Observe(ctx context.Context, id string) (planner.State, error) {
	if err := ctx.Err(); err != nil {
		return planner.State{}, err
	}
	name := ServiceName(id)
	rec, err := d.record(name)
	if err != nil {
		return planner.State{}, err
	}
	insts, err := d.sup.Instances(name)
	if err != nil {
		return planner.State{}, err
	}
	if rec == nil && len(insts) == 0 {
		return planner.State{}, nil
	}
	hash := ""
	if rec != nil {
		hash = rec.SpecHash
	}
	running := 0
	var down, loops []string
	for _, in := range insts {
		_ = service.RotateLog(LogFile(d.state, name, in.Replica), logMaxBytes, logKeep)
		switch {
		case in.Done:
			running++ // exited as its restart policy allows: not drift
		case in.Alive || in.Pending:
			running++
			if in.SpecHash != hash && in.Alive {
				hash = in.SpecHash
			}
			if in.CrashLoop {
				loops = append(loops, fmt.Sprintf("replica %d crash-looping (%s)", in.Replica, in.LastExit))
			}
		default:
			what := "gone"
			if in.LastExit != "" {
				what = in.LastExit
			}
			down = append(down, fmt.Sprintf("replica %d %s", in.Replica, what))
		}
	}
	st := planner.State{Exists: true, Fields: []planner.Field{{Name: FieldSpec, Value: hash}, {Name: FieldReplicas, Value: strconv.Itoa(running)}}}
	if rec != nil && running < rec.Replicas {
		st.Note = fmt.Sprintf("%d of %d replicas not running", rec.Replicas-running, rec.Replicas)
		if len(down) > 0 {
			st.Note += " (" + summarise(down) + ")"
		}
	} else if len(loops) > 0 {
		st.Note = summarise(loops)
	}
	return st, nil
}

// Apply starts, updates, restarts or stops a service's instances. After a
// start, an instance with a health probe must become healthy within its
// startup grace, or the action fails.
func (d *ServiceDriver) Apply(ctx context.Context, a planner.Action, _ any) error {
	name := ServiceName(a.Resource)
	if a.Type == planner.Delete {
		return d.remove(ctx, name)
	}
	d.mu.Lock()
	w := d.wanted[name]
	d.mu.Unlock()
	if w == nil {
		return errors.New("no declaration for it: call Desired before Apply with the same device")
	}
	insts, err := d.sup.Instances(name)
	if err != nil {
		return err
	}
	grace := w.spec.StopTimeout.D()
	if grace <= 0 {
		grace = DefaultStopTimeout
	}
	byReplica := map[int]InstanceState{}
	for _, in := range insts {
		byReplica[in.Replica] = in
	}
	// Replicas are updated one at a time, each checked before the next, so
	// a bad update stops at its first replica.
	for i, in := range w.instances {
		cur, ok := byReplica[i]
		if a.Type != planner.Restart && !a.Restart && ok && (cur.Alive || cur.Pending || cur.Done) && cur.SpecHash == w.hash {
			continue // this replica is as declared: untouched
		}
		proc, err := d.sup.Run(ctx, in, w.hash, w.spec.Restart, grace, w.probes[i])
		if err != nil {
			return err
		}
		err = d.settle(ctx, w.spec.Restart, proc)
		if err == nil && w.probes[i] != nil {
			err = w.probes[i].WaitHealthy(ctx, func() bool { return d.sup.rt.Alive(proc) })
		}
		if err != nil {
			return fmt.Errorf("replica %d: %w", i, err)
		}
	}
	for _, cur := range insts {
		if cur.Replica >= len(w.instances) {
			if err := d.sup.Halt(ctx, name, cur.Replica, grace); err != nil {
				return err
			}
		}
	}
	return d.saveRecord(name, serviceRecord{SpecHash: w.hash, Replicas: len(w.instances)})
}

// startSettle is how long a service without a health probe must keep
// running after a start to count as healthy.
var startSettle = 300 * time.Millisecond

// settle checks that an instance is still running after startSettle (a
// health probe then checks the rest): one that exits at once fails the update (and
// rolls it back), as an unhealthy one does. A service whose restart policy
// lets it finish (never, on-failure) may exit.
func (d *ServiceDriver) settle(ctx context.Context, policy string, p service.Proc) error {
	if policy == manifest.RestartNever || policy == manifest.RestartOnFailure {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(startSettle):
	}
	if !d.sup.rt.Alive(p) {
		return fmt.Errorf("%w: pid %d exited within %s of its start; see tend logs", service.ErrUnhealthy, p.PID, startSettle)
	}
	return nil
}

// remove stops every instance of a service and forgets it; its logs stay.
func (d *ServiceDriver) remove(ctx context.Context, name string) error {
	insts, err := d.sup.Instances(name)
	if err != nil {
		return err
	}
	for _, in := range insts {
		if err := d.sup.Halt(ctx, name, in.Replica, DefaultStopTimeout); err != nil {
			return err
		}
	}
	return os.RemoveAll(filepath.Join(d.sup.dir, name))
}

func (d *ServiceDriver) recordPath(name string) string {
	return filepath.Join(d.sup.dir, name, "service.json")
}

func (d *ServiceDriver) record(name string) (*serviceRecord, error) {
	var r serviceRecord
	found, err := readJSON(d.recordPath(name), &r)
	if err != nil || !found {
		return nil, err
	}
	return &r, nil
}

func (d *ServiceDriver) saveRecord(name string, r serviceRecord) error {
	return writeJSON(filepath.Join(d.sup.dir, name), "service.json", r, 0o644)
}
