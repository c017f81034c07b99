//go:build linux

package process

import (
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/procfs"

	"github.com/tend-dev/tend/applier/service"
)

// FindOrphans returns the processes this runtime started for in that still
// run: session leaders whose environment holds in's invocation
// ($TEND_INVOCATION_ID), which tend alone sets and an exec keeps. An
// instance without an invocation (recorded by an older tend) is matched by
// its exact command line and environment, among those started since then
// (less two seconds: /proc gives start times against a boot time in whole
// seconds). It reads every
// process of /proc; it is called only after tend died between starting an
// instance and recording it.
func (e *Runtime) FindOrphans(in Instance, since time.Time) ([]Proc, error) {
	mounted, err := procFS()
	if err != nil {
		return nil, err
	}
	procs, err := mounted.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	var out []Proc
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil || st.Session != p.PID || st.State == "Z" {
			continue
		}
		// The invocation alone names this start; without one (a record of
		// an older tend), the start time narrows the match. Only then is
		// the wall clock trusted, which a clock step moves.
		if in.Invocation == "" {
			started, err := st.StartTime()
			if err != nil || time.Unix(0, int64(started*1e9)).Before(since.Add(-2*time.Second)) {
				continue
			}
		}
		if startedFor(p, in) {
			out = append(out, Proc{PID: p.PID, StartTime: st.Starttime})
		}
	}
	return out, nil
}

// startedFor reports whether p is a process started for in (see Orphans).
func startedFor(p procfs.Proc, in Instance) bool {
	have, err := p.Environ()
	if err != nil {
		return false
	}
	if in.Invocation != "" {
		return slices.Contains(have, service.InvocationEnv+"="+in.Invocation)
	}
	cmd, err := p.CmdLine()
	if err != nil || !slices.Equal(cmd, in.Command) {
		return false
	}
	slices.Sort(have)
	return slices.Equal(have, instanceEnv(in))
}
