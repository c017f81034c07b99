package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tend-dev/tend/applier"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/oci/verify"
	"github.com/tend-dev/tend/planner"
	"github.com/tend-dev/tend/render"
)

// DefaultStopTimeout is how long a stopping service has between SIGTERM
// and SIGKILL when its spec gives no stopTimeout.
const DefaultStopTimeout = 10 * time.Second

// Driver starts, updates and stops the instances of services through a
// Supervisor. An update touches only the replicas whose spec differs or
// that are not running, and scaling starts or stops only the difference.
type Driver struct {
	sup   *Supervisor
	state string // stateDir
	opts  DriverOptions

	mu        sync.Mutex
	resolvers map[string]render.ImageResolver // by what they resolve ("image"), for one tick (see Forget)
}

// DriverOptions configure a Driver: what its runtimes are told of the
// node (see Node).
type DriverOptions struct {
	// Device names the node: the dev.tend.device label of its containers.
	Device string
	// Registry says how images are resolved (the credentials and
	// insecure registries of models).
	Registry transport.Options
	// KeepImages is how many images no declared service runs stay on the
	// engine, the most recently used, for a rollback to start again.
	KeepImages int
	// Verify is the signature every container image must carry before
	// it is pulled (runtime.verify); Verifier checks it.
	Verify   *manifest.ArtifactVerify
	Verifier *verify.Verifier
}

// node is what the driver tells its runtimes of the node.
func (d *Driver) node() Node {
	return Node{Device: d.opts.Device, StateDir: d.state, Registry: d.opts.Registry, KeepImages: d.opts.KeepImages}
}

// record is what tend keeps about a service as a whole, beside the records
// of its instances: the spec and replica count last applied.
type record struct {
	SpecHash string `json:"specHash"`
	Replicas int    `json:"replicas"`
	// A container service's image as declared, the digest it ran and the
	// tag it resolved through.
	Image       string `json:"image,omitempty"`
	ImageDigest string `json:"imageDigest,omitempty"`
	ImageTag    string `json:"imageTag,omitempty"`
}

var (
	_ applier.Runner   = (*Driver)(nil)
	_ applier.Undoer   = (*Driver)(nil)
	_ applier.Verifier = (*Driver)(nil)
)

// NewDriver returns a driver running services through sup.
func NewDriver(stateDir string, sup *Supervisor, opts DriverOptions) *Driver {
	return &Driver{sup: sup, state: stateDir, opts: opts}
}

// Kind returns planner.KindService.
func (d *Driver) Kind() planner.Kind { return planner.KindService }

// Runs reports that services run: a failed start rolls the plan back.
func (d *Driver) Runs() bool { return true }

// LogFile is where the output of one replica of a service goes.
func LogFile(stateDir, name string, replica int) string {
	return statedir.Dir(stateDir).Log(name, replica)
}

// runtime is the runtime of s's kind.
func (d *Driver) runtime(s render.Service) (Runtime, error) {
	return d.sup.rts.Get(s.Kind)
}

// instances returns the instances and probes of s, one per replica, each
// with the spec its runtime makes of it.
func (d *Driver) instances(s render.Service) ([]Instance, []*Probe, error) {
	rt, err := d.runtime(s)
	if err != nil {
		return nil, nil, err
	}
	node := d.node()
	ins := make([]Instance, len(s.Replicas))
	probes := make([]*Probe, len(s.Replicas))
	for i, r := range s.Replicas {
		spec, err := rt.Spec(s, i, node)
		if err != nil {
			return nil, nil, fmt.Errorf("replica %d: %w", i, err)
		}
		ins[i] = Instance{Service: s.Name, Replica: i, Spec: spec}
		probes[i] = ProbeFrom(r.Health, func(s string) string { return s })
	}
	return ins, probes, nil
}

// Observe reports a service's spec hash (the one last applied, or that of
// a running instance started from another) and how many replicas run. An
// instance the supervisor is about to restart counts as running: the plan
// does not race its backoff.
func (d *Driver) Observe(ctx context.Context, id string, spec any) (planner.State, error) {
	if err := ctx.Err(); err != nil {
		return planner.State{}, err
	}
	name := planner.ServiceName(id)
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
		// An instance an older tend started writes its file itself: cap
		// it as it is seen. A log shim keeps the others under the cap.
		_ = RotateLog(LogFile(d.state, name, in.Replica), LogMaxBytes, LogKeep)
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
	st := planner.State{Exists: true, Fields: []planner.Field{{Name: planner.FieldSpec, Value: hash}}}
	if s, ok := spec.(render.Service); (ok && s.Image != "") || (rec != nil && rec.ImageDigest != "") {
		image := ""
		if rec != nil {
			image = rec.ImageDigest
		}
		st.Fields = append(st.Fields, planner.Field{Name: planner.FieldImage, Value: image})
	}
	st.Fields = append(st.Fields, planner.Field{Name: planner.FieldReplicas, Value: strconv.Itoa(running)})
	drift, err := d.sup.LimitDrift(ctx, name)
	if err != nil {
		return planner.State{}, err
	}
	limits := limitNote(drift)
	st.Fields = append(st.Fields, planner.Field{Name: planner.FieldLimits, Value: limits})
	if rec != nil && running < rec.Replicas {
		st.Note = fmt.Sprintf("%d of %d replicas not running", rec.Replicas-running, rec.Replicas)
		if len(down) > 0 {
			st.Note += " (" + summarise(down) + ")"
		}
	} else if len(loops) > 0 {
		st.Note = summarise(loops)
	}
	if limits != LimitsAsDeclared {
		st.Note = strings.TrimPrefix(st.Note+"; "+limits, "; ")
	}
	if s, ok := spec.(render.Service); ok {
		st.Owed = owed(insts, s.Inputs)
	}
	return st, nil
}

// owed returns the dependencies whose declared value differs from what a
// running instance was started with (its record says so; an older record
// says nothing and owes nothing), sorted.
func owed(insts []InstanceState, want map[string]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, in := range insts {
		if in.Inputs == nil || !(in.Alive || in.Pending) {
			continue
		}
		for id, v := range want {
			if had, ok := in.Inputs[id]; ok && had != v && !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Apply starts, updates, restarts or stops a service's instances; spec is
// its render.Service. After a start, an instance with a health probe must
// become healthy within its startup grace, or the action fails.
func (d *Driver) Apply(ctx context.Context, a planner.Action, spec any) error {
	name := planner.ServiceName(a.Resource)
	if a.Type == planner.Delete {
		return d.remove(ctx, name)
	}
	s, ok := spec.(render.Service)
	if !ok {
		return fmt.Errorf("%s %s: want a render.Service, got %T", a.Type, a.Resource, spec)
	}
	insts, err := d.sup.Instances(name)
	if err != nil {
		return err
	}
	grace := s.StopTimeout
	if grace <= 0 {
		grace = DefaultStopTimeout
	}
	byReplica := map[int]InstanceState{}
	for _, in := range insts {
		byReplica[in.Replica] = in
	}
	wanted, probes, err := d.instances(s)
	if err != nil {
		return err
	}
	drift, err := d.sup.LimitDrift(ctx, name)
	if err != nil {
		return err
	}
	// Replicas are updated one at a time, each checked before the next, so
	// a bad update stops at its first replica.
	for i, in := range wanted {
		cur, ok := byReplica[i]
		if a.Type != planner.Restart && !a.Restart && ok && (cur.Alive || cur.Pending || cur.Done) && cur.SpecHash == s.Hash {
			if len(drift[i]) == 0 {
				continue // this replica is as declared: untouched
			}
			// Limits changed on the node: put back in place, or, where
			// the runtime cannot, by a restart.
			err := d.sup.RestoreLimits(ctx, name, i)
			if err == nil {
				d.sup.log.InfoContext(ctx, "limits restored", logKeyResource, a.Resource, logKeyReplica, i, "drift", strings.Join(drift[i], ", "))
				continue
			}
			d.sup.log.WarnContext(ctx, "limits cannot be restored in place; restarting", logKeyResource, a.Resource, logKeyReplica, i, logKeyError, err.Error())
		}
		spec := RunSpec{Hash: s.Hash, Policy: s.Restart, Grace: grace, Probe: probes[i], Inputs: s.Inputs}
		if err := d.startHealthy(ctx, in, spec); err != nil {
			return fmt.Errorf("replica %d: %w", i, err)
		}
	}
	for _, cur := range insts {
		if cur.Replica >= len(wanted) {
			if err := d.sup.Halt(ctx, name, cur.Replica, grace); err != nil {
				return err
			}
		}
	}
	return d.saveRecord(name, record{SpecHash: s.Hash, Replicas: len(wanted), Image: s.Image, ImageDigest: s.ImageDigest, ImageTag: s.ImageTag})
}

// startSettle is how long a service without a health probe must keep
// running after a start to count as healthy.
var startSettle = 300 * time.Millisecond

// startupGrace is the startup grace of a service without a probe.
var startupGrace = DefaultStartupGrace

// remove stops every instance of a service and forgets it; its logs stay.
func (d *Driver) remove(ctx context.Context, name string) error {
	insts, err := d.sup.Instances(name)
	if err != nil {
		return err
	}
	for _, in := range insts {
		if err := d.sup.Halt(ctx, name, in.Replica, DefaultStopTimeout); err != nil {
			return err
		}
	}
	return removeServiceDir(d.sup.dir.Service(name))
}

// removeServiceDir removes a service's folder. A watcher of a replica just
// halted may open its lock file there once more before it gives up: the
// removal tries again a few times.
func removeServiceDir(dir string) error {
	var err error
	for range 5 {
		if err = os.RemoveAll(dir); !errors.Is(err, syscall.ENOTEMPTY) {
			return err
		}
	}
	return err
}

func (d *Driver) recordPath(name string) string {
	return d.sup.dir.Spec(name)
}

func (d *Driver) record(name string) (*record, error) {
	var r record
	found, err := statedir.ReadJSON(d.recordPath(name), &r)
	if err != nil || !found {
		return nil, err
	}
	return &r, nil
}

func (d *Driver) saveRecord(name string, r record) error {
	return statedir.WriteJSON(d.sup.dir.Service(name), statedir.ServiceFile, r, 0o644)
}

// Undo notes the instances running now: the undo starts each again from
// its old spec (onto the models and files put back before it) and stops
// the replicas the action added.
func (d *Driver) Undo(_ context.Context, a planner.Action, _ any) (func(context.Context) error, error) {
	name := planner.ServiceName(a.Resource)
	old, err := d.sup.serviceRecords(name)
	if err != nil {
		return nil, err
	}
	rec, err := d.record(name)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		now, err := d.sup.serviceRecords(name)
		if err != nil {
			return err
		}
		current := map[int]instanceRecord{}
		for _, n := range now {
			current[n.Instance.Replica] = n
		}
		was := map[int]bool{}
		for _, o := range old {
			was[o.Instance.Replica] = true
			if n, ok := current[o.Instance.Replica]; ok && sameHandle(n.Proc, o.Proc) && n.SpecHash == o.SpecHash {
				continue // never touched by the plan: still on the old inputs
			}
			spec := RunSpec{Hash: o.SpecHash, Policy: o.Policy, Grace: DefaultStopTimeout, Probe: o.Probe, Inputs: o.Inputs}
			if _, err := d.sup.Run(ctx, o.Instance, spec); err != nil {
				return err
			}
		}
		for _, n := range now {
			if !was[n.Instance.Replica] {
				if err := d.sup.Halt(ctx, name, n.Instance.Replica, DefaultStopTimeout); err != nil {
					return err
				}
			}
		}
		if rec == nil {
			return removeServiceDir(d.sup.dir.Service(name))
		}
		return d.saveRecord(name, *rec)
	}, nil
}

// summarise lists the first few items and counts the rest.
func summarise(items []string) string {
	const show = 5
	if len(items) <= show {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:show], ", "), len(items)-show)
}
