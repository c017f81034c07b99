//go:build linux

package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tend-dev/tend/applier/service"
)

var _ service.LimitKeeper = (*Runtime)(nil)

// limitFile is one limit of an instance's cgroup: where it is, what the
// spec says it holds, and how messages name it.
type limitFile struct {
	dir, file string
	want      string
	what      string              // "memory limit"
	show      func(string) string // a value as messages print it
}

// limitFiles are the limit files of in's cgroup that its spec declares,
// where this node has the hierarchy; the cgroup folder is the one Run
// made for in (service-replica under the runtime's parent).
func (e *Runtime) limitFiles(in Instance) []limitFile {
	name := in.Service + "-" + strconv.Itoa(in.Replica)
	var out []limitFile
	quota := strconv.FormatInt(in.CPUMilli*cpuPeriodUS/1000, 10)
	switch e.cg.mode {
	case cgroupV2:
		dir := filepath.Join(e.cg.root, e.cg.parent, name)
		if in.Memory > 0 {
			out = append(out, limitFile{dir, "memory.max", strconv.FormatInt(in.Memory, 10), "memory limit", showBytes})
		}
		if in.CPUMilli > 0 {
			out = append(out, limitFile{dir, "cpu.max", quota + " " + strconv.Itoa(cpuPeriodUS), "cpu limit", showCPUMax})
		}
	case cgroupV1:
		if in.Memory > 0 && e.cg.v1mem {
			dir := filepath.Join(e.cg.root, "memory", e.cg.parent, name)
			out = append(out, limitFile{dir, "memory.limit_in_bytes", strconv.FormatInt(in.Memory, 10), "memory limit", showBytes})
		}
		if in.CPUMilli > 0 && e.cg.v1cpu {
			dir := filepath.Join(e.cg.root, "cpu", e.cg.parent, name)
			out = append(out,
				limitFile{dir, "cpu.cfs_period_us", strconv.Itoa(cpuPeriodUS), "cpu period", func(v string) string { return v + "µs" }},
				limitFile{dir, "cpu.cfs_quota_us", quota, "cpu limit", func(v string) string { return showQuota(v, cpuPeriodUS) }})
		}
	}
	return out
}

// LimitDrift compares the limit files of in's cgroup with its spec, and
// checks that the instance's main process is still in that cgroup. An
// instance started without its limits (no writable cgroup: its handle's
// warning says so) has nothing to compare.
func (e *Runtime) LimitDrift(_ context.Context, in service.Instance, h service.Handle) []string {
	pi, err := instance(in)
	if err != nil {
		return nil
	}
	if w, ok := h.(service.Warner); ok && w.Warning() != "" {
		return nil
	}
	var out []string
	dirs := map[string]bool{}
	for _, l := range e.limitFiles(pi) {
		dirs[l.dir] = true
		b, err := os.ReadFile(filepath.Join(l.dir, l.file))
		if err != nil {
			if os.IsNotExist(err) {
				out = append(out, fmt.Sprintf("%s: cgroup %s gone (made again and the process moved back)", l.what, l.dir))
			}
			continue
		}
		if got := strings.TrimSpace(string(b)); !sameLimit(l.file, got, l.want) {
			out = append(out, fmt.Sprintf("%s %s on node, %s declared (rewritten in place)", l.what, l.show(got), l.show(l.want)))
		}
	}
	if pid := h.PID(); pid > 0 && len(dirs) > 0 {
		for dir := range dirs {
			if !inCgroup(pid, dir) {
				out = append(out, fmt.Sprintf("pid %d left its cgroup %s (moved back)", pid, dir))
			}
		}
	}
	return sortedUnique(out)
}

// RestoreLimits makes in's cgroup again if it is gone, rewrites the
// limits its spec declares and moves the main process back into it.
func (e *Runtime) RestoreLimits(_ context.Context, in service.Instance, h service.Handle) error {
	pi, err := instance(in)
	if err != nil {
		return err
	}
	name := pi.Service + "-" + strconv.Itoa(pi.Replica)
	if _, _, err := e.cg.create(name, pi.Memory, pi.CPUMilli); err != nil {
		return err
	}
	dirs := map[string]bool{}
	for _, l := range e.limitFiles(pi) {
		dirs[l.dir] = true
	}
	if pid := h.PID(); pid > 0 {
		for dir := range dirs {
			if !inCgroup(pid, dir) {
				if err := writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
					return fmt.Errorf("move pid %d back into cgroup %s: %w", pid, dir, err)
				}
			}
		}
	}
	return nil
}

// inCgroup reports whether pid is a member of the cgroup at dir, by its
// cgroup.procs. A pid whose list cannot be read counts as a member: only
// what is seen is drift.
func inCgroup(pid int, dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return true
	}
	want := strconv.Itoa(pid)
	for f := range strings.FieldsSeq(string(b)) {
		if f == want {
			return true
		}
	}
	return false
}

// showBytes prints a memory limit as the manifest does ("64Mi"), and the
// kernel's "max" or its v1 near-2^63 for none.
func showBytes(v string) string {
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case v == "max" || err == nil && n >= 1<<62:
		return "none"
	case err != nil:
		return v
	}
	return service.FormatBytes(n)
}

// showCPUMax prints a v2 cpu.max ("50000 100000") as millicores ("500m").
func showCPUMax(v string) string {
	quota, period, ok := strings.Cut(v, " ")
	if !ok {
		return v
	}
	p, err := strconv.ParseInt(period, 10, 64)
	if err != nil || p <= 0 {
		return v
	}
	return showQuota(quota, p)
}

// showQuota prints a CFS quota over period µs as millicores, "none" for
// no quota ("max" on v2, -1 on v1).
func showQuota(quota string, period int64) string {
	if quota == "max" || quota == "-1" {
		return "none"
	}
	q, err := strconv.ParseInt(quota, 10, 64)
	if err != nil {
		return quota
	}
	return strconv.FormatInt(q*1000/period, 10) + "m"
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// sameLimit reports whether a limit file holds want. The kernel keeps a
// memory limit in whole pages: 1G (10^9 bytes) reads back as 999997440, and
// is as declared.
func sameLimit(file, got, want string) bool {
	if got == want {
		return true
	}
	if !strings.HasPrefix(file, "memory.") {
		return false
	}
	g, err1 := strconv.ParseInt(got, 10, 64)
	w, err2 := strconv.ParseInt(want, 10, 64)
	page := int64(os.Getpagesize())
	return err1 == nil && err2 == nil && g == w/page*page
}
