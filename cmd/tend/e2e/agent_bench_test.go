package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/testkit/testgit"
)

// BenchmarkAgentIdle runs `tend agent` on a device with 100 managed files
// and nothing to do, ticking every 500ms, and reports its resident memory
// (target < 30 MB) and the CPU time of one no-op tick, from /proc.
func BenchmarkAgentIdle(b *testing.B) {
	repo := testgit.NewRepo(b)
	var entries []string
	for i := range 100 {
		entries = append(entries, entry(fmt.Sprintf("/etc/infer/f%03d.yaml", i), fmt.Sprintf("value: %d\n", i), ""))
	}
	repo.WriteFile("devices/cam-017/device.yaml", files(entries...))
	repo.Commit("100 files")
	n := agentBenchNode(b, repo.Dir())
	agent := startBenchAgent(b, n, "--schedule", "@every 500ms")
	pid := agent.Process.Pid
	waitFor(b, func() bool { return fileCount(n.root+"/etc/infer") == 100 })
	time.Sleep(2 * time.Second) // warm up: a few no-op ticks
	for b.Loop() {
		cpu0, t0 := cpuTicks(b, pid), time.Now()
		time.Sleep(5 * time.Second) // ten ticks
		cpu1 := cpuTicks(b, pid)
		ticks := float64(time.Since(t0)) / float64(500*time.Millisecond)
		b.ReportMetric(float64(cpu1-cpu0)*10/ticks, "cpu-ms/tick") // USER_HZ is 100: 10 ms per clock tick
		b.ReportMetric(rssMB(b, pid), "rss-MB")
	}
}

// cpuTicks is utime+stime of pid in clock ticks.
func cpuTicks(b *testing.B, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

func rssMB(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

func fileCount(dir string) int {
	entries, _ := os.ReadDir(dir)
	return len(entries)
}
