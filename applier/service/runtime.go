package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tend-dev/tend/internal/errkind"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/render"
)

// Instance is one replica of a service, as started: every ${…} already
// expanded. The core knows which service and replica it is and under
// which invocation it starts; what it runs is its Spec, which only the
// runtime of the Spec's kind reads.
type Instance struct {
	Service string
	Replica int
	// Invocation is unique to one start of the instance (set by the
	// supervisor; a restart in place keeps it, see Restarter) and reaches
	// the instance as $TEND_INVOCATION_ID, as systemd's $INVOCATION_ID
	// does: what a tend killed while starting it left running is found by
	// it (see Sweeper), even after an exec.
	Invocation string
	Spec       Spec
}

// Spec is what one instance runs, in its runtime's terms (a command line
// and its user for a process, an image and its mounts for a container).
// A runtime makes it from the rendered service (Runtime.Spec) and decodes
// it from a record (Runtime.DecodeSpec); the supervisor stores it as JSON,
// its fields beside the instance's Service, Replica and Invocation.
type Spec interface {
	// Kind is the kind of the runtime that runs it, as registered.
	Kind() string
}

// Handle is a runtime's hold on one started instance. The supervisor
// keeps it, as JSON, in the instance's record, and after an agent restart
// gets it back through Runtime.Recover: what is inside is the runtime's
// alone (a pid and its start time, a container id).
type Handle interface {
	// ID is the instance's identity, unique across restarts of tend: two
	// handles with one ID hold one running instance.
	ID() string
	// PID is the instance's main process on this node, as logs and status
	// show it; 0 when there is none to show.
	PID() int
	// Alive reports whether the instance still runs, as the one started.
	Alive() bool
	// Wait blocks until the instance exits or ctx ends, and says how it
	// ended (Known=false when the runtime cannot know: an adopted process;
	// Removed when the instance itself is gone: a container removed).
	// Safe to call once per handle, from any goroutine.
	Wait(ctx context.Context) (ExitStatus, error)
	// Stop stops the instance (asking it to end, killing it after grace)
	// and returns once it is gone. One already gone is no error.
	Stop(ctx context.Context, grace time.Duration) error
}

// InvocationEnv is the variable that carries Instance.Invocation.
const InvocationEnv = "TEND_INVOCATION_ID"

// DefaultPath is an instance's PATH when its Env sets none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ExitStatus is how a process ended.
type ExitStatus struct {
	Known       bool   // false for an adopted process (not our child): the kernel gives its status to its parent
	Code        int    // exit code when it exited; -1 when a signal ended it
	Signal      string // e.g. "killed", "terminated" when a signal ended it
	OOMKilled   bool   // the kernel's OOM killer ended it under its memory limit (from the cgroup's counters)
	MemoryLimit int64  // the memory limit it ran under, in bytes, when OOMKilled
	// Removed: the instance is gone, not only ended (a container removed
	// from its engine, by hand or by another tool, or by tend's own Stop,
	// which the supervisor tells apart). Known and Code may still say how
	// its process ended.
	Removed bool
	// At is when it ended, as its runtime knows it (the engine's finish
	// time of a container, the reaping of a process); zero when unknown.
	At time.Time
}

// String is the status as status and logs print it: "exit code 3",
// "killed by signal killed (out of memory: limit 64Mi)", "exited (status
// unknown: adopted process)", "removed outside tend".
func (e ExitStatus) String() string {
	if e.Removed {
		return RemovedExit
	}
	oom := "out of memory"
	if e.MemoryLimit > 0 {
		oom += ": limit " + FormatBytes(e.MemoryLimit)
	}
	switch {
	case !e.Known && e.OOMKilled:
		return "killed (" + oom + "; status otherwise unknown: adopted process)"
	case !e.Known:
		return "exited (status unknown: adopted process)"
	case e.Signal != "" && e.OOMKilled:
		return "killed by signal " + e.Signal + " (" + oom + ")"
	case e.Signal != "":
		return "killed by signal " + e.Signal
	}
	return fmt.Sprintf("exit code %d", e.Code)
}

// RemovedExit is how status and logs name the end of an instance removed
// outside tend (see ExitStatus.Removed).
const RemovedExit = "removed outside tend"

// Failed reports whether the process did not exit cleanly with code 0 (an
// unknown status counts as failed).
func (e ExitStatus) Failed() bool {
	return !e.Known || e.Signal != "" || e.Code != 0 || e.OOMKilled
}

// FormatBytes prints n in the largest binary unit that divides it: "64Mi",
// "1536Ki", "1000".
func FormatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.suffix)
		}
	}
	return fmt.Sprint(n)
}

// Runtime runs the instances of one kind of spec ("process",
// "container"): the service driver and the supervisor call it, and never
// look inside its specs or handles. A runtime registers a Factory for its
// kind (see Register); what else it can do is an optional interface it
// implements (Sweeper, Preparer, ImageResolving, Finisher, LogWriter).
type Runtime interface {
	// Kind is the kind of spec it runs, as registered.
	Kind() string
	// Spec is the spec of replica i of s on this node.
	Spec(s render.Service, i int, node Node) (Spec, error)
	// DecodeSpec decodes a spec from its JSON in a record.
	DecodeSpec(raw json.RawMessage) (Spec, error)
	// Start starts in detached: it survives tend's exit. It returns once
	// the instance runs. An instance that cannot run as declared (a
	// command, user, image or device that does not exist) is an
	// ErrInvalidInstance error that names it and says what to do,
	// returned before anything runs.
	Start(ctx context.Context, in Instance) (Handle, error)
	// Recover returns the handle of an instance this kind of runtime
	// started, from its JSON in a record: how the next tend adopts it.
	Recover(raw json.RawMessage) (Handle, error)
}

// Node is what a runtime is told of the node, with what it is asked.
type Node struct {
	Device   string // the device's name
	StateDir string
	// Registry says how images are resolved (the credentials and
	// insecure registries of models).
	Registry transport.Options
	// KeepImages is how many images no declared service runs stay, the
	// most recently used, for a rollback to start again.
	KeepImages int
}

// Sweeper is a Runtime that can find the instances it started since a
// time, when tend died before it recorded them.
type Sweeper interface {
	Orphans(ctx context.Context, in Instance, since time.Time) ([]Handle, error)
}

// Restarter is a Runtime that can start an instance that exited again in
// place, as the engine's own restart policy does (a container started
// again, not created anew): what the exited one left, its output and its
// exit state, stays for a post-mortem. Restart gets the instance as it
// was started (same invocation) and the handle that exited, and returns
// the handle of the instance running again. When the instance cannot be
// started in place (it is gone or damaged, or what it would run differs
// from in: its spec, image digest or the paths its mounts lead to), it
// returns an error matching ErrRecreate before anything runs, and the
// supervisor starts a new instance instead.
type Restarter interface {
	Restart(ctx context.Context, in Instance, h Handle) (Handle, error)
}

// ErrRecreate: an instance cannot be started again in place (see
// Restarter); a new one is started instead.
var ErrRecreate = errors.New("cannot restart in place")

// Ender is a Handle that can end its instance as Stop does while keeping
// what it leaves (a container stays, exited, with its output), so that
// it can be restarted in place. The supervisor ends an instance whose
// health probe failed this way.
type Ender interface {
	End(ctx context.Context, grace time.Duration) error
}

// Warner is a Handle whose start left a warning (resources asked for that
// could not be applied): never a silent no-op.
type Warner interface {
	Warning() string
}

// ErrInvalidInstance: the instance cannot start as declared: its command,
// user, group or working directory does not exist on this node, tend may
// not switch to its user, or its limits are below what a process can run
// under. Not worth retrying before the manifest or the node changes.
var ErrInvalidInstance = errors.New("invalid service instance")

// Invalidf formats an error that matches ErrInvalidInstance, for a
// Runtime that refuses an instance before anything runs.
func Invalidf(format string, args ...any) error {
	return errkind.New(ErrInvalidInstance, format, args...)
}

// ContainerHandle is a Handle on a container: status shows its id.
type ContainerHandle interface {
	ContainerID() string
}

// ImageSpec is a Spec that runs an image: status shows it, by digest.
type ImageSpec interface {
	ImageRef() string
}

// pidOf is h's pid, 0 for no handle.
func pidOf(h Handle) int {
	if h == nil {
		return 0
	}
	return h.PID()
}

// warningOf is what h's start warned of, "" for none.
func warningOf(h Handle) string {
	if w, ok := h.(Warner); ok {
		return w.Warning()
	}
	return ""
}

// sameHandle reports whether a and b hold one instance.
func sameHandle(a, b Handle) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.ID() == b.ID()
}
