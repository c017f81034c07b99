package container

import (
	"slices"
	"syscall"

	"github.com/prometheus/procfs"

	"github.com/tend-dev/tend/applier/service"
)

// killInvocation kills the processes of this node whose environment names
// invocation (service.InvocationEnv): a task its engine no longer knows
// as running. Nothing is found when the engine runs elsewhere.
func killInvocation(invocation string) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return
	}
	want := service.InvocationEnv + "=" + invocation
	for _, p := range procs {
		env, err := p.Environ()
		if err == nil && slices.Contains(env, want) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
}
