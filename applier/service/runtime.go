package service

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tend-dev/tend/internal/errkind"
)

// Instance is one replica of a service, as started: every ${…} already
// expanded.
type Instance struct {
	Service    string
	Replica    int
	Command    []string          // Command[0]: an absolute path, or a name looked up in PATH
	Env        map[string]string // the whole environment besides PATH (DefaultPath unless Env sets PATH); nothing is inherited from tend
	WorkingDir string            // "" = "/"
	User       string            // name or numeric uid; "" = tend's own user
	Group      string            // name or numeric gid; "" = the user's primary group
	Memory     int64             // bytes; 0 = no limit
	CPUMilli   int64             // millicores; 0 = no limit
	LogFile    string            // stdout and stderr are appended here (O_APPEND); the folder is created; "" = discarded
	// Invocation is unique to one start of the instance (set by the
	// supervisor) and reaches the process as $TEND_INVOCATION_ID, as
	// systemd's $INVOCATION_ID does: what a tend killed while starting it
	// left running is found by it (see Sweeper), even after an exec.
	Invocation string `json:",omitempty"`

	// Container fields, for a service with an image (see the container
	// runtime); empty for a process. Command, when set, replaces the
	// image's entrypoint; LogFile is unused (the engine keeps the logs).
	Image   string            `json:",omitempty"` // image@sha256:digest (or a tag, pulled as it is)
	Args    []string          `json:",omitempty"` // after the entrypoint
	Mounts  []Mount           `json:",omitempty"` // bind mounts
	Network string            `json:",omitempty"` // host (the default) | none | bridge
	Devices []string          `json:",omitempty"` // host device paths, each as HOST[:CONTAINER[:PERMISSIONS]]
	GPUs    string            `json:",omitempty"` // "all" or a count, through the engine's NVIDIA runtime
	Labels  map[string]string `json:",omitempty"` // on the container: dev.tend.device, dev.tend.resource, dev.tend.spec
}

// Mount is a host path bound into a container.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// InvocationEnv is the variable that carries Instance.Invocation.
const InvocationEnv = "TEND_INVOCATION_ID"

// DefaultPath is an instance's PATH when its Env sets none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Proc identifies one running process across agent restarts: a pid is
// reused by the kernel, the pair (pid, start time) is not.
type Proc struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"` // field 22 of /proc/PID/stat, clock ticks since boot
	// Limits is a warning when resources were asked for and could not be
	// applied (no writable cgroup); "" otherwise. Never a silent no-op.
	Limits string `json:"limits,omitempty"`
	// Container is the engine's id of the container whose main process PID
	// is; "" for a process.
	Container string `json:"container,omitempty"`
}

// ExitStatus is how a process ended.
type ExitStatus struct {
	Known       bool   // false for an adopted process (not our child): the kernel gives its status to its parent
	Code        int    // exit code when it exited; -1 when a signal ended it
	Signal      string // e.g. "killed", "terminated" when a signal ended it
	OOMKilled   bool   // the kernel's OOM killer ended it under its memory limit (from the cgroup's counters)
	MemoryLimit int64  // the memory limit it ran under, in bytes, when OOMKilled
}

// String is the status as status and logs print it: "exit code 3",
// "killed by signal killed (out of memory: limit 64Mi)", "exited (status
// unknown: adopted process)".
func (e ExitStatus) String() string {
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

// Runtime runs service instances. The exec runtime is the embedded default;
// a container runtime can implement the same interface.
type Runtime interface {
	// Start starts the instance in its own session and process group
	// (setsid), detached: it survives tend's exit. It returns once the
	// process runs (exec succeeded). A command or user/group that does not
	// exist is an error that names it and says what to do, returned before
	// anything runs.
	Start(ctx context.Context, in Instance) (Proc, error)
	// Alive reports whether p is still the same running process (pid
	// alive, start time matches, not a zombie).
	Alive(p Proc) bool
	// Wait blocks until p exits or ctx ends. For a process this runtime
	// started (a child), it reaps it and returns the real status; for any
	// other (adopted after a restart of tend) it waits through a pidfd and
	// returns Known=false. Safe to call once per Proc, from any goroutine.
	Wait(ctx context.Context, p Proc) (ExitStatus, error)
	// Stop sends SIGTERM to p's process group, waits up to grace, then
	// SIGKILL to the group, and returns once p is gone (and reaped, if a
	// child). A p already gone is no error.
	Stop(ctx context.Context, p Proc, grace time.Duration) error
}

// Sweeper is a Runtime that can find the processes it started for an
// instance since a time, when tend died before it recorded them.
type Sweeper interface {
	Orphans(in Instance, since time.Time) ([]Proc, error)
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
