//go:build linux

package process

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/applier/service"
)

// requireCgroups: the tests below use the node's real cgroups (v1 memory
// and cpu here, as root).
func requireCgroups(t *testing.T) *Runtime {
	t.Helper()
	requireRoot(t, "writing cgroups")
	e := newTestRuntime(t)
	require.NotEqual(t, cgroupNone, e.cg.mode, "no cgroup hierarchy under %s", cgroupMount)
	return e
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// instanceDirs are where the cgroup of instance name is, memory and cpu.
func instanceDirs(e *Runtime, name string) (mem, cpu string) {
	if e.cg.mode == cgroupV2 {
		d := filepath.Join(e.cg.root, e.cg.parent, name)
		return d, d
	}
	return filepath.Join(e.cg.root, "memory", e.cg.parent, name), filepath.Join(e.cg.root, "cpu", e.cg.parent, name)
}

func TestMemoryLimitOOMKilled(t *testing.T) {
	e := requireCgroups(t)
	t.Parallel()
	mem, _ := instanceDirs(e, "oom-0")
	p := start(t, e, Instance{
		Service: "oom",
		// -wait-cgroup: allocate only once inside the limit (on v1 the
		// process is moved in just after it started).
		Command: []string{svcBin, "-wait-cgroup", "/" + testCgroupParent + "/oom-0", "-alloc", "256", "-sleep", "1h"},
		Memory:  64 << 20,
		LogFile: filepath.Join(t.TempDir(), "oom.log"),
	})
	require.Empty(t, p.Limits)
	st, err := e.Wait(waitCtx(t), p)
	require.NoError(t, err)
	assert.Equal(t, service.ExitStatus{Known: true, Code: -1, Signal: "killed", OOMKilled: true, MemoryLimit: 64 << 20}, st)
	assert.Equal(t, "killed by signal killed (out of memory: limit 64Mi)", st.String())
	assert.NoDirExists(t, mem, "the instance's cgroup is removed once its process is gone")
}

func TestLimitsWrittenAndRemoved(t *testing.T) {
	e := requireCgroups(t)
	t.Parallel()
	mem, cpu := instanceDirs(e, "limits-1")
	p := start(t, e, Instance{Service: "limits", Replica: 1, Command: []string{svcBin, "-sleep", "1h"}, Memory: 128 << 20, CPUMilli: 1500})
	require.Empty(t, p.Limits)

	if e.cg.mode == cgroupV1 {
		assert.Equal(t, strconv.Itoa(128<<20), readTrim(t, filepath.Join(mem, "memory.limit_in_bytes")))
		assert.Equal(t, "100000", readTrim(t, filepath.Join(cpu, "cpu.cfs_period_us")))
		assert.Equal(t, "150000", readTrim(t, filepath.Join(cpu, "cpu.cfs_quota_us")))
	} else {
		assert.Equal(t, strconv.Itoa(128<<20), readTrim(t, filepath.Join(mem, "memory.max")))
		assert.Equal(t, "150000 100000", readTrim(t, filepath.Join(cpu, "cpu.max")))
	}
	for _, d := range []string{mem, cpu} {
		assert.Contains(t, strings.Fields(readTrim(t, filepath.Join(d, "cgroup.procs"))), strconv.Itoa(p.PID))
	}

	// After a restart of tend: found from /proc/PID/cgroup, removed by Stop.
	after := newTestRuntime(t)
	cg := after.cg.instanceOf(p.PID)
	require.NotNil(t, cg)
	assert.Equal(t, mem, cg.memDir)
	assert.Equal(t, cpu, cg.cpuDir)
	assert.Equal(t, int64(128<<20), cg.memory)
	require.NoError(t, after.Stop(context.Background(), p, time.Second))
	assert.NoDirExists(t, mem)
	assert.NoDirExists(t, cpu)
}

func TestLimitRefusedByKernel(t *testing.T) {
	e := requireCgroups(t)
	t.Parallel()
	if e.cg.mode == cgroupV1 && !e.cg.v1cpu {
		t.Skip("no v1 cpu hierarchy")
	}
	// Below checkLimits' floor, straight to the kernel: a 100µs quota.
	_, _, err := e.cg.create("refused-0", 0, 1)
	require.ErrorIs(t, err, service.ErrInvalidInstance)
	assert.Contains(t, err.Error(), "the kernel refuses")
	assert.Contains(t, err.Error(), "invalid argument")
	_, cpu := instanceDirs(e, "refused-0")
	assert.NoDirExists(t, cpu, "nothing is left behind")
}

func TestNoWritableCgroup(t *testing.T) {
	t.Parallel()
	e := newTestRuntime(t)
	e.cg = detectCgroups(t.TempDir(), testCgroupParent) // nothing mounted there
	p := start(t, e, Instance{Service: "nocg", Command: []string{svcBin, "-sleep", "1h"}, Memory: 64 << 20, CPUMilli: 500})
	assert.Equal(t, "resource limits not applied: no writable cgroup (v2 /sys/fs/cgroup or v1 memory/cpu); run tend as root with cgroups mounted", p.Limits)
	assert.True(t, e.Alive(p), "it starts anyway")

	p = start(t, e, Instance{Service: "nolimits", Command: []string{svcBin, "-sleep", "1h"}})
	assert.Empty(t, p.Limits, "no warning when no limit was asked for")
}

// The v2 layout cannot be tried for real on this machine (its unified
// hierarchy has no controllers): the files tend writes are checked on a
// copy of the layout in a temporary folder.
func TestCgroupV2Files(t *testing.T) {
	t.Parallel()
	layout := func(t *testing.T, controllers string) string {
		root := t.TempDir()
		for p, content := range map[string]string{
			"cgroup.controllers":                    controllers,
			"cgroup.subtree_control":                "",
			"tend/cgroup.subtree_control":           "",
			"tend/infer-0/memory.max":               "max",
			"tend/infer-0/cpu.max":                  "max 100000",
			"tend/infer-0/memory.events":            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 2\n",
			"tend/infer-0/cgroup.procs":             "",
			"tend/infer-0/cgroup.kill":              "",
			"tend/infer-0/unused-but-kernel-made.x": "",
		} {
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, p), []byte(content), 0o644))
		}
		return root
	}

	t.Run("limits and controllers", func(t *testing.T) {
		root := layout(t, "cpuset cpu io memory pids")
		c := detectCgroups(root, "tend")
		require.Equal(t, cgroupV2, c.mode)
		cg, warn, err := c.create("infer-0", 64<<20, 1500)
		require.NoError(t, err)
		require.Empty(t, warn)
		dir := filepath.Join(root, "tend", "infer-0")
		assert.Equal(t, []string{dir}, cg.dirs())
		assert.Equal(t, "67108864", readTrim(t, filepath.Join(dir, "memory.max")))
		assert.Equal(t, "150000 100000", readTrim(t, filepath.Join(dir, "cpu.max")))
		assert.Equal(t, "+memory +cpu", readTrim(t, filepath.Join(root, "cgroup.subtree_control")))
		assert.Equal(t, "+memory +cpu", readTrim(t, filepath.Join(root, "tend", "cgroup.subtree_control")))
		assert.Equal(t, uint64(2), cg.oomBase)
		assert.False(t, cg.oomKilled())
		require.NoError(t, os.WriteFile(filepath.Join(dir, "memory.events"), []byte("oom 1\noom_kill 3\n"), 0o644))
		assert.True(t, cg.oomKilled())
	})
	t.Run("a controller missing is a warning for its limit", func(t *testing.T) {
		root := layout(t, "memory pids")
		cg, warn, err := detectCgroups(root, "tend").create("infer-0", 64<<20, 1500)
		require.NoError(t, err)
		assert.Equal(t, "cpu limit "+noCgroupWarning, warn)
		assert.Equal(t, "max 100000", readTrim(t, filepath.Join(root, "tend", "infer-0", "cpu.max")), "untouched")
		assert.NotEmpty(t, cg.memDir)
		assert.Empty(t, cg.cpuDir)
	})
	t.Run("no controller at all", func(t *testing.T) {
		root := layout(t, "pids")
		cg, warn, err := detectCgroups(root, "tend").create("infer-0", 64<<20, 0)
		require.NoError(t, err)
		assert.Nil(t, cg)
		assert.Equal(t, "resource limits "+noCgroupWarning, warn)
	})
}

// TestLimitDriftRestoredInPlace changes a running instance's limits by
// hand, as an operator would with echo into the cgroup's files, and moves
// its process out of its cgroup: LimitDrift names each change, and
// RestoreLimits puts every one back without restarting the process.
func TestLimitDriftRestoredInPlace(t *testing.T) {
	e := requireCgroups(t)
	t.Parallel()
	if e.cg.mode == cgroupV1 && (!e.cg.v1mem || !e.cg.v1cpu) {
		t.Skip("no v1 memory and cpu hierarchies")
	}
	in := service.Instance{Service: "drift", Replica: 0, Spec: Spec{Command: []string{svcBin, "-sleep", "1h"}, Memory: 64 << 20, CPUMilli: 500}}
	h, err := e.Start(context.Background(), in)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Stop(context.Background(), time.Second) })
	require.Empty(t, e.LimitDrift(context.Background(), in, h), "as started: no drift")

	mem, cpu := instanceDirs(e, "drift-0")
	memFile, cpuFile, cpuWant := "memory.max", "cpu.max", "max 100000"
	if e.cg.mode == cgroupV1 {
		memFile, cpuFile, cpuWant = "memory.limit_in_bytes", "cpu.cfs_quota_us", "200000"
	}
	require.NoError(t, os.WriteFile(filepath.Join(mem, memFile), []byte(strconv.Itoa(256<<20)), 0))
	require.NoError(t, os.WriteFile(filepath.Join(cpu, cpuFile), []byte(cpuWant), 0))
	// Out of the memory cgroup, into its parent hierarchy's root.
	root := filepath.Join(e.cg.root, "memory")
	if e.cg.mode == cgroupV2 {
		root = e.cg.root
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(h.PID())), 0))

	drift := e.LimitDrift(context.Background(), in, h)
	cpuShown := "2000m"
	if e.cg.mode == cgroupV2 {
		cpuShown = "none"
	}
	want := []string{
		"cpu limit " + cpuShown + " on node, 500m declared (rewritten in place)",
		"memory limit 256Mi on node, 64Mi declared (rewritten in place)",
		"pid " + strconv.Itoa(h.PID()) + " left its cgroup " + mem + " (moved back)",
	}
	if e.cg.mode == cgroupV2 {
		want = want[:2] // one folder: the pid left both at once
		want = append(want, "pid "+strconv.Itoa(h.PID())+" left its cgroup "+mem+" (moved back)")
	}
	assert.Equal(t, want, drift)

	pid := h.PID()
	require.NoError(t, e.RestoreLimits(context.Background(), in, h))
	assert.Empty(t, e.LimitDrift(context.Background(), in, h), "restored")
	assert.Equal(t, strconv.Itoa(64<<20), readTrim(t, filepath.Join(mem, memFile)))
	assert.Contains(t, strings.Fields(readTrim(t, filepath.Join(mem, "cgroup.procs"))), strconv.Itoa(pid))
	assert.True(t, h.Alive(), "restored in place, not restarted")
	assert.Equal(t, pid, h.PID())
}

// TestLimitDriftNotReportedWithoutCgroups: limits a node could not apply
// stay the start's warning; they are not drift on every tick.
func TestLimitDriftNotReportedWithoutCgroups(t *testing.T) {
	t.Parallel()
	e := newTestRuntime(t)
	e.cg = detectCgroups(t.TempDir(), testCgroupParent) // nothing mounted there
	in := service.Instance{Service: "nocg", Spec: Spec{Command: []string{svcBin, "-sleep", "1h"}, Memory: 64 << 20}}
	h, err := e.Start(context.Background(), in)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Stop(context.Background(), time.Second) })
	require.NotEmpty(t, h.(service.Warner).Warning())
	assert.Empty(t, e.LimitDrift(context.Background(), in, h))
}

// A memory limit that is no whole number of pages (1G is 10^9 bytes) is
// kept by the kernel rounded down to a page: that is as declared, not
// drift on every tick.
func TestLimitDriftMemoryInPages(t *testing.T) {
	e := requireCgroups(t)
	t.Parallel()
	in := service.Instance{Service: "pages", Spec: Spec{Command: []string{svcBin, "-sleep", "1h"}, Memory: 100_000_000}}
	h, err := e.Start(context.Background(), in)
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Stop(context.Background(), time.Second) })
	mem, _ := instanceDirs(e, "pages-0")
	file := "memory.max"
	if e.cg.mode == cgroupV1 {
		file = "memory.limit_in_bytes"
	}
	require.NotEqual(t, "100000000", readTrim(t, filepath.Join(mem, file)), "the kernel rounds it to pages")
	assert.Empty(t, e.LimitDrift(context.Background(), in, h))
}
