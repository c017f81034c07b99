package service

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/tend-dev/tend/internal/feature"
	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/render"
)

// Config is what a Factory makes a node's runtime from.
type Config struct {
	Agent        *manifest.AgentConfig
	CgroupParent string // the cgroup under which every instance gets its own
	Log          *slog.Logger
}

// Factory makes the runtime of one kind for a node. A runtime that cannot
// be made (an engine address that does not parse) is an error that says
// what to fix; the node runs its other kinds.
type Factory func(Config) (Runtime, error)

var (
	registryMu sync.Mutex
	factories  = map[string]Factory{}
)

// Register makes f the factory of the runtime of kind, as
// database/sql.Register does for a driver: a runtime's package registers
// itself when imported. It panics when kind is registered twice.
func Register(kind string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := factories[kind]; dup {
		panic("service: runtime " + kind + " registered twice")
	}
	factories[kind] = f
}

// Kinds returns the registered kinds, sorted.
func Kinds() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]string, 0, len(factories))
	for k := range factories {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Runtimes are a node's runtimes, by kind: the driver and the supervisor
// look up the runtime of a spec, or of a record, by its kind.
type Runtimes struct {
	byKind map[string]Runtime
	errs   map[string]error // kinds whose factory failed
}

// Open makes a runtime of every registered kind from c. A kind whose
// factory fails is kept with its error, which Get returns.
func Open(c Config) *Runtimes {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	registryMu.Lock()
	fs := make(map[string]Factory, len(factories))
	for k, f := range factories {
		fs[k] = f
	}
	registryMu.Unlock()
	r := &Runtimes{byKind: map[string]Runtime{}, errs: map[string]error{}}
	for kind, f := range fs {
		rt, err := f(c)
		switch {
		case err != nil:
			r.errs[kind] = err
		case rt.Kind() != kind:
			r.errs[kind] = fmt.Errorf("runtime registered as %s runs %s", kind, rt.Kind())
		default:
			r.byKind[kind] = rt
		}
	}
	return r
}

// RuntimesOf returns rts by their kinds, without the registry: a test's
// runtimes, or a node that runs only some kinds.
func RuntimesOf(rts ...Runtime) *Runtimes {
	r := &Runtimes{byKind: map[string]Runtime{}, errs: map[string]error{}}
	for _, rt := range rts {
		r.byKind[rt.Kind()] = rt
	}
	return r
}

// Get returns the runtime of kind. A kind this node has no runtime for is
// an ErrInvalidInstance error: not worth retrying before the node's
// configuration changes.
func (r *Runtimes) Get(kind string) (Runtime, error) {
	if rt, ok := r.byKind[kind]; ok {
		return rt, nil
	}
	if err := r.errs[kind]; err != nil {
		return nil, Invalidf("no %s runtime on this node: %v", kind, err)
	}
	if kind == render.KindContainer {
		// Registered from cmd/tend unless built with tend_omit_containers.
		return nil, Invalidf("no %s runtime on this node: %v", kind, feature.Containers.Unregistered())
	}
	return nil, Invalidf("no %s runtime on this node: tend was started without one", kind)
}

// All returns the runtimes, sorted by kind.
func (r *Runtimes) All() []Runtime {
	out := make([]Runtime, 0, len(r.byKind))
	for _, k := range slices.Sorted(maps.Keys(r.byKind)) {
		out = append(out, r.byKind[k])
	}
	return out
}

// Close closes every runtime that holds something open (an engine's
// client).
func (r *Runtimes) Close() error {
	var errs []error
	for _, rt := range r.byKind {
		if c, ok := rt.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
