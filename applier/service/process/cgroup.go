//go:build linux

package process

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tend-dev/tend/applier/service"
)

// Limits the runtime accepts. The kernel takes a memory limit down to one
// page, but no process starts in it: below MinMemory (Docker's floor) Start
// refuses, rather than start something the OOM killer ends at once.
const (
	MinMemory   = 6 << 20
	MinCPUMilli = 10 // the kernel's smallest CFS quota: 1ms per 100ms period

	cgroupMount = "/sys/fs/cgroup"
	cpuPeriodUS = 100000
)

// noCgroupWarning is Proc.Limits when no limit could be applied.
const noCgroupWarning = "not applied: no writable cgroup (v2 /sys/fs/cgroup or v1 memory/cpu); run tend as root with cgroups mounted"

type cgroupMode int

const (
	cgroupNone cgroupMode = iota
	cgroupV1
	cgroupV2
)

// cgroupFS is the cgroup layout of the node, seen from tend: under root,
// either the unified (v2) hierarchy or the v1 memory and cpu hierarchies,
// each with tend's subtree parent.
type cgroupFS struct {
	root   string
	parent string
	mode   cgroupMode
	v1mem  bool // v1: the memory hierarchy is mounted
	v1cpu  bool // v1: the cpu hierarchy is mounted
}

func detectCgroups(root, parent string) cgroupFS {
	c := cgroupFS{root: root, parent: parent}
	if exists(filepath.Join(root, "cgroup.controllers")) {
		c.mode = cgroupV2
		return c
	}
	c.v1mem = exists(filepath.Join(root, "memory", "cgroup.procs"))
	c.v1cpu = exists(filepath.Join(root, "cpu", "cgroup.procs"))
	if c.v1mem || c.v1cpu {
		c.mode = cgroupV1
	}
	return c
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// instanceCgroup is the cgroup of one instance: one folder on v2, one per
// hierarchy (memory, cpu) on v1.
type instanceCgroup struct {
	mode    cgroupMode
	memDir  string // where the memory limit and its OOM counters are; "" = no memory limit
	cpuDir  string // "" = no cpu limit
	memory  int64  // the memory limit, for messages
	oomBase uint64 // the OOM kill counter when the instance started
}

// dirs are the instance's cgroup folders, each once.
func (c *instanceCgroup) dirs() []string {
	var d []string
	for _, p := range []string{c.memDir, c.cpuDir} {
		if p != "" && !slices.Contains(d, p) {
			d = append(d, p)
		}
	}
	return d
}

// checkLimits refuses limits no process can run under.
func checkLimits(memory, cpuMilli int64) error {
	if memory < 0 || (memory > 0 && memory < MinMemory) {
		return service.Invalidf("memory limit %s is below the %s a process needs to start: raise services[].resources.memory", service.FormatBytes(memory), service.FormatBytes(MinMemory))
	}
	if cpuMilli < 0 || (cpuMilli > 0 && cpuMilli < MinCPUMilli) {
		return service.Invalidf("cpu limit %dm is below the kernel's smallest quota (%dm): raise services[].resources.cpu", cpuMilli, MinCPUMilli)
	}
	return nil
}

// create makes the cgroup of instance name and writes its limits. Where a
// limit cannot be applied because no hierarchy for it is writable, it
// returns a warning and carries on without it; a limit the kernel refuses is
// an error, and nothing is left behind. A nil cgroup means no limit applies.
func (c cgroupFS) create(name string, memory, cpuMilli int64) (*instanceCgroup, string, error) {
	if memory <= 0 && cpuMilli <= 0 {
		return nil, "", nil
	}
	cg := &instanceCgroup{mode: c.mode, memory: memory}
	var missing []string
	var err error
	switch c.mode {
	case cgroupV2:
		missing, err = c.createV2(cg, name, memory, cpuMilli)
	case cgroupV1:
		missing, err = c.createV1(cg, name, memory, cpuMilli)
	default:
		if memory > 0 {
			missing = append(missing, "memory")
		}
		if cpuMilli > 0 {
			missing = append(missing, "cpu")
		}
	}
	if err != nil {
		_ = cg.remove()
		return nil, "", err
	}
	var warn string
	switch {
	case len(missing) == 0:
	case len(missing) == 1 && memory > 0 && cpuMilli > 0:
		warn = missing[0] + " limit " + noCgroupWarning
	default:
		warn = "resource limits " + noCgroupWarning
	}
	if cg.memDir == "" && cg.cpuDir == "" {
		return nil, warn, nil
	}
	if cg.memDir != "" {
		cg.oomBase, _ = cg.oomKills()
	}
	return cg, warn, nil
}

func (c cgroupFS) createV1(cg *instanceCgroup, name string, memory, cpuMilli int64) (missing []string, err error) {
	if memory > 0 {
		dir := filepath.Join(c.root, "memory", c.parent, name)
		switch err := mkdirCgroup(c.v1mem, dir); {
		case notWritable(err):
			missing = append(missing, "memory")
		case err != nil:
			return nil, err
		default:
			cg.memDir = dir
			if err := writeLimit(dir, "memory.limit_in_bytes", strconv.FormatInt(memory, 10)); err != nil {
				return nil, err
			}
		}
	}
	if cpuMilli > 0 {
		dir := filepath.Join(c.root, "cpu", c.parent, name)
		switch err := mkdirCgroup(c.v1cpu, dir); {
		case notWritable(err):
			missing = append(missing, "cpu")
		case err != nil:
			return nil, err
		default:
			cg.cpuDir = dir
			if err := writeLimit(dir, "cpu.cfs_period_us", strconv.Itoa(cpuPeriodUS)); err != nil {
				return nil, err
			}
			if err := writeLimit(dir, "cpu.cfs_quota_us", strconv.FormatInt(cpuMilli*cpuPeriodUS/1000, 10)); err != nil {
				return nil, err
			}
		}
	}
	return missing, nil
}

func (c cgroupFS) createV2(cg *instanceCgroup, name string, memory, cpuMilli int64) (missing []string, err error) {
	b, err := os.ReadFile(filepath.Join(c.root, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("read cgroup controllers: %w", err)
	}
	available := strings.Fields(string(b))
	var want []string
	for _, w := range []struct {
		ctrl string
		on   bool
	}{{"memory", memory > 0}, {"cpu", cpuMilli > 0}} {
		switch {
		case !w.on:
		case slices.Contains(available, w.ctrl):
			want = append(want, w.ctrl)
		default:
			missing = append(missing, w.ctrl)
		}
	}
	if len(want) == 0 {
		return missing, nil
	}
	parent := filepath.Join(c.root, c.parent)
	dir := filepath.Join(parent, name)
	err = os.MkdirAll(parent, 0o755)
	if err == nil {
		err = enableControllers(c.root, want)
	}
	if err == nil {
		err = enableControllers(parent, want)
	}
	if err == nil {
		err = mkdirCgroup(true, dir)
	}
	if notWritable(err) {
		return append(missing, want...), nil
	}
	if err != nil {
		return nil, err
	}
	if slices.Contains(want, "memory") {
		cg.memDir = dir
		if err := writeLimit(dir, "memory.max", strconv.FormatInt(memory, 10)); err != nil {
			return nil, err
		}
	}
	if slices.Contains(want, "cpu") {
		cg.cpuDir = dir
		if err := writeLimit(dir, "cpu.max", fmt.Sprintf("%d %d", cpuMilli*cpuPeriodUS/1000, cpuPeriodUS)); err != nil {
			return nil, err
		}
	}
	return missing, nil
}

// enableControllers turns ctrls on for the children of dir, where they are
// not on yet.
func enableControllers(dir string, ctrls []string) error {
	p := filepath.Join(dir, "cgroup.subtree_control")
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	on := strings.Fields(string(b))
	var add []string
	for _, c := range ctrls {
		if !slices.Contains(on, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	if err := writeFile(p, strings.Join(add, " ")); err != nil {
		return fmt.Errorf("enable %s in %s: %w", strings.Join(add, " "), p, err)
	}
	return nil
}

// mkdirCgroup makes the folder of a cgroup and its parents. mounted says
// whether the hierarchy is there at all: if it is not, making folders would
// only write to the tmpfs under /sys/fs/cgroup, so it counts as not writable.
func mkdirCgroup(mounted bool, dir string) error {
	if !mounted {
		return fs.ErrNotExist
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	return nil
}

// notWritable: err says the cgroup hierarchy is missing, read-only or not
// ours to write.
func notWritable(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// writeLimit writes a limit; the kernel refusing it is the instance's fault.
func writeLimit(dir, file, value string) error {
	p := filepath.Join(dir, file)
	if err := writeFile(p, value); err != nil {
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.ERANGE) {
			return service.Invalidf("the kernel refuses %s = %s: %w; change services[].resources", p, value, err)
		}
		return fmt.Errorf("set %s = %s: %w", p, value, err)
	}
	return nil
}

// writeFile writes to a file the kernel made: never creates one.
func writeFile(p, value string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// place moves pid into the cgroup: on v1, right after the process started
// (v2 starts it in place through clone3). Until then, for the few
// microseconds between exec and this write, the process runs without its
// limits, and a process it forks in that window stays outside them.
func (c *instanceCgroup) place(pid int) error {
	for _, d := range c.dirs() {
		if err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("move pid %d into cgroup %s: %w", pid, d, err)
		}
	}
	return nil
}

// oomKills reads how many processes the OOM killer ended in the cgroup:
// memory.events oom_kill on v2, memory.oom_control oom_kill on v1 (kernel
// 4.13 and later) or, before that, memory.failcnt (how often the limit was
// hit, which an OOM kill follows).
func (c *instanceCgroup) oomKills() (uint64, error) {
	if c.memDir == "" {
		return 0, errors.New("no memory cgroup")
	}
	file := "memory.events"
	if c.mode == cgroupV1 {
		file = "memory.oom_control"
	}
	b, err := os.ReadFile(filepath.Join(c.memDir, file))
	if err != nil {
		return 0, err
	}
	if n, ok := keyedValue(b, "oom_kill"); ok {
		return n, nil
	}
	if c.mode == cgroupV1 {
		if b, err := os.ReadFile(filepath.Join(c.memDir, "memory.failcnt")); err == nil {
			return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		}
	}
	return 0, fmt.Errorf("no oom_kill in %s", filepath.Join(c.memDir, file))
}

// oomKilled reports whether the OOM killer ended a process in the cgroup
// since the instance started.
func (c *instanceCgroup) oomKilled() bool {
	if c == nil || c.memDir == "" {
		return false
	}
	n, err := c.oomKills()
	return err == nil && n > c.oomBase
}

// keyedValue reads "key value" lines, as in memory.events.
func keyedValue(b []byte, key string) (uint64, bool) {
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// procs lists the pids in the cgroup.
func (c *instanceCgroup) procs() []int {
	var pids []int
	for _, d := range c.dirs() {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for f := range strings.FieldsSeq(string(b)) {
			if n, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, n) {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

// killAll sends SIGKILL to every process in the cgroup, including any that
// left the process group: cgroup.kill on v2 (kernel 5.14 and later), else a
// few rounds over cgroup.procs, for processes forked meanwhile.
func (c *instanceCgroup) killAll() {
	if c == nil {
		return
	}
	if c.mode == cgroupV2 && writeFile(filepath.Join(c.dirs()[0], "cgroup.kill"), "1") == nil {
		return
	}
	for range 5 {
		pids := c.procs()
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// remove deletes the cgroup's folders. A folder still holding a process
// stays (unix.EBUSY).
func (c *instanceCgroup) remove() error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, d := range c.dirs() {
		if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// removeWait removes the cgroup, retrying for up to a second while the
// kernel finishes tearing down processes that were just killed.
func (c *instanceCgroup) removeWait() error {
	deadline := time.Now().Add(time.Second)
	for {
		err := c.remove()
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// instanceOf finds the cgroup of a running process from /proc/PID/cgroup,
// when it is one of tend's (under the parent); nil otherwise. It is how an
// adopted process's cgroup is found after a restart of tend.
func (c cgroupFS) instanceOf(pid int) *instanceCgroup {
	if c.mode == cgroupNone {
		return nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return nil
	}
	prefix := "/" + c.parent + "/"
	cg := &instanceCgroup{mode: c.mode}
	for line := range strings.Lines(string(b)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], prefix) {
			continue
		}
		path := parts[2]
		if c.mode == cgroupV2 {
			if parts[0] == "0" && parts[1] == "" {
				dir := filepath.Join(c.root, path)
				cg.memDir, cg.cpuDir = dir, dir
			}
			continue
		}
		for _, ctrl := range strings.Split(parts[1], ",") {
			switch ctrl {
			case "memory":
				cg.memDir = filepath.Join(c.root, "memory", path)
			case "cpu":
				cg.cpuDir = filepath.Join(c.root, "cpu", path)
			}
		}
	}
	if cg.memDir == "" && cg.cpuDir == "" {
		return nil
	}
	if cg.memDir != "" {
		file := "memory.max"
		if c.mode == cgroupV1 {
			file = "memory.limit_in_bytes"
		}
		if b, err := os.ReadFile(filepath.Join(cg.memDir, file)); err == nil {
			if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n < 1<<62 {
				cg.memory = n
			}
		}
	}
	return cg
}
