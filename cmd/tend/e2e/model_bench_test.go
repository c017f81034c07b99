package e2e

// Benchmarks of model pulls against the reference tool: the tend binary
// and the oras CLI pulling the same ORAS artifact from CNCF distribution
// (Debian's docker-registry) on loopback. make bench installs oras.

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

const orasInstall = "go install oras.land/oras/cmd/oras@v1.3.6"

// BenchmarkModelPull times a cold `tend apply` of a device declaring a
// ~200 MB three-file model (fresh state dir and root each run) against
// `oras pull` into a fresh folder followed by `sync` (tend fsyncs what it
// writes: equal durability) and against a plain `oras pull`, medians of 5
// runs each, interleaved. ratio is tend / (oras pull + sync); the target is
// at most 0.8.
func BenchmarkModelPull(b *testing.B) {
	benchPull(b, map[string]int{"model.bin": 190 << 20, "weights.bin": 9 << 20, "labels.txt": 1 << 10})
}

// BenchmarkModelPullSmall is BenchmarkModelPull for a 4 MB model (a 4 MB
// file and a 1 KiB one), where a cold apply's fixed costs (clone, render,
// state writes, process start) weigh most. The target is a ratio (tend /
// (oras pull + sync)) of at most 1.5; ratio-plain is tend / oras pull.
func BenchmarkModelPullSmall(b *testing.B) {
	benchPull(b, map[string]int{"model.bin": 4 << 20, "labels.txt": 1 << 10})
}

// benchPull pushes files (name → size, random bytes) as an ORAS artifact
// and compares cold `tend apply` runs with `oras pull` of it.
func benchPull(b *testing.B, files map[string]int) {
	oras := orasCLI(b)
	host := testoci.StartDistribution(b)
	src := b.TempDir()
	names := slices.Sorted(maps.Keys(files))
	for i, name := range names {
		writeRandom(b, filepath.Join(src, name), files[name], byte(i+1))
	}
	ref := host + "/models/detector:v1"
	orasRun(b, oras, src, append([]string{"push", "--plain-http", ref}, names...)...)
	n := newBenchNode(b, host, ref)
	pulled := filepath.Join(b.TempDir(), "pulled")
	pull := []string{oras, "pull", "--plain-http", "-o", pulled, ref}

	for b.Loop() {
		var tendD, orasSyncD, orasD []time.Duration
		for range 5 {
			n.reset(b)
			tendD = append(tendD, timed(func() { n.apply(b) }))
			wipe(b, pulled)
			orasSyncD = append(orasSyncD, timed(func() { mustRun(b, pull...); mustRun(b, "sync") }))
			wipe(b, pulled)
			orasD = append(orasD, timed(func() { mustRun(b, pull...) }))
		}
		tm, osm, om := medianOf(tendD), medianOf(orasSyncD), medianOf(orasD)
		b.ReportMetric(millis(tm), "tend-ms")
		b.ReportMetric(millis(osm), "oras-sync-ms")
		b.ReportMetric(millis(om), "oras-ms")
		b.ReportMetric(float64(tm)/float64(osm), "ratio")
		b.ReportMetric(float64(tm)/float64(om), "ratio-plain")
	}
}

// BenchmarkModelPullRSS reports the peak resident set size of the tend
// process cold-pulling a 1 GiB single-file model (target: under 60 MB),
// and that of `oras pull` for reference.
func BenchmarkModelPullRSS(b *testing.B) {
	oras := orasCLI(b)
	host := testoci.StartDistribution(b)
	src := b.TempDir()
	writeRandom(b, filepath.Join(src, "model.bin"), 1<<30, 4)
	ref := host + "/models/large:v1"
	orasRun(b, oras, src, "push", "--plain-http", ref, "model.bin")
	wipe(b, src) // the registry has its own copy
	n := newBenchNode(b, host, ref)
	pulled := filepath.Join(b.TempDir(), "pulled")

	for b.Loop() {
		n.reset(b)
		start := time.Now()
		tendRSS := peakRSS(b, command(tendBin, append([]string{"apply"}, n.flags...)...))
		tendD := time.Since(start)
		wipe(b, pulled)
		orasRSS := peakRSS(b, command(oras, "pull", "--plain-http", "-o", pulled, ref))
		b.ReportMetric(tendRSS, "rss-MB")
		b.ReportMetric(orasRSS, "oras-rss-MB")
		b.ReportMetric(millis(tendD), "tend-ms")
	}
}

// BenchmarkModelUpgradeBytes reports what an upgrade downloads: with v1 of
// a ~200 MB three-file model active, the tag moves to a v2 that changes
// only its 1 KiB file. upgrade-bytes is the growth of the blob store,
// logged-bytes the blob bytes tend logs as downloaded ("model downloaded"),
// expected-bytes the new file's blob plus the new manifest.
func BenchmarkModelUpgradeBytes(b *testing.B) {
	oras := orasCLI(b)
	host := testoci.StartDistribution(b)
	src := b.TempDir()
	writeRandom(b, filepath.Join(src, "model.bin"), 190<<20, 1)
	writeRandom(b, filepath.Join(src, "weights.bin"), 9<<20, 2)
	writeRandom(b, filepath.Join(src, "labels.txt"), 1<<10, 3)
	repo := host + "/models/detector"
	files := []string{"model.bin", "weights.bin", "labels.txt"}
	orasRun(b, oras, src, append([]string{"push", "--plain-http", repo + ":v1"}, files...)...)
	writeRandom(b, filepath.Join(src, "labels.txt"), 1<<10, 5)
	orasRun(b, oras, src, append([]string{"push", "--plain-http", repo + ":v2"}, files...)...)
	manifest := orasRun(b, oras, src, "manifest", "fetch", "--plain-http", repo+":v2")
	labels, err := os.ReadFile(filepath.Join(src, "labels.txt"))
	if err != nil {
		b.Fatal(err)
	}
	expected := map[string]int64{testoci.Digest(manifest): int64(len(manifest)), testoci.Digest(labels): int64(len(labels))}
	n := newBenchNode(b, host, repo+":stable")

	for b.Loop() {
		orasRun(b, oras, src, "tag", "--plain-http", repo+":v1", "stable")
		n.reset(b)
		n.apply(b)
		before := storeBlobs(b, n.state)
		orasRun(b, oras, src, "tag", "--plain-http", repo+":v2", "stable")
		cmd := n.apply(b)
		after := storeBlobs(b, n.state)
		var grew int64
		for _, d := range newBlobs(before, after) {
			grew += after[d]
			if _, ok := expected[d]; !ok {
				b.Errorf("upgrade stored blob %s (%d bytes) beyond the changed file and the manifest", d, after[d])
			}
		}
		var logged int64
		for _, m := range downloadedLine.FindAllStringSubmatch(cmd.Stderr.(*bytes.Buffer).String(), -1) {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			logged += v
		}
		b.ReportMetric(float64(grew), "upgrade-bytes")
		b.ReportMetric(float64(logged), "logged-bytes")
		b.ReportMetric(float64(expected[testoci.Digest(manifest)]+expected[testoci.Digest(labels)]), "expected-bytes")
	}
}

var downloadedLine = regexp.MustCompile(`msg="model downloaded" .*?\bbytes=(\d+)`)

// orasCLI finds the oras CLI where go install puts it (make bench does)
// or on PATH, or skips.
func orasCLI(b *testing.B) string {
	b.Helper()
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		gobin, gopath, _ := strings.Cut(string(out), "\n")
		dirs := []string{strings.TrimSpace(gobin)}
		for _, dir := range filepath.SplitList(strings.TrimSpace(gopath)) {
			dirs = append(dirs, filepath.Join(dir, "bin"))
		}
		for _, dir := range dirs {
			if p := filepath.Join(dir, "oras"); dir != "" && isExecutable(p) {
				return p
			}
		}
	}
	if p, err := exec.LookPath("oras"); err == nil {
		return p
	}
	b.Skip("oras is not installed: " + orasInstall + " (make bench does)")
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// orasRun runs the oras CLI in dir and returns its standard output.
func orasRun(b *testing.B, oras, dir string, args ...string) []byte {
	b.Helper()
	cmd := exec.Command(oras, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("oras %v: %v\n%s%s", args, err, out, stderr.Bytes())
	}
	return out
}

// writeRandom writes size bytes of a seeded ChaCha8 stream to p: random
// enough that nothing compresses or deduplicates it, and fast.
func writeRandom(b *testing.B, p string, size int, seed byte) {
	b.Helper()
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.NewChaCha8([32]byte{seed})
	buf := make([]byte, 4<<20)
	for left := size; left > 0; left -= len(buf) {
		buf = buf[:min(left, len(buf))]
		_, _ = r.Read(buf)
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// benchNode is a device declaring one model at ref, whose root and state
// dir reset makes fresh.
type benchNode struct {
	root, state string
	flags       []string
}

func newBenchNode(b *testing.B, host, ref string) *benchNode {
	b.Helper()
	repo := testgit.NewRepo(b)
	repo.WriteFile("devices/cam-017/device.yaml", distDevice(ref))
	repo.Commit("model")
	dir := b.TempDir()
	n := &benchNode{root: filepath.Join(dir, "root"), state: filepath.Join(dir, "state")}
	cfg := filepath.Join(dir, "none.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	n.flags = []string{"--repo", repo.Dir(), "--device", "cam-017", "--path", "devices/{device}",
		"--root", n.root, "--state-dir", n.state, "--allow-path", "/opt/models", "--insecure-registry", host,
		"--log-format", "text", "--config", cfg}
	return n
}

// reset empties the node, and syncs so that no earlier write is flushed
// during the next timed run.
func (n *benchNode) reset(b *testing.B) {
	b.Helper()
	wipe(b, n.state)
	wipe(b, n.root)
	if err := os.MkdirAll(n.root, 0o755); err != nil {
		b.Fatal(err)
	}
}

// apply runs `tend apply` on the node and returns the finished command,
// its standard error in a *bytes.Buffer.
func (n *benchNode) apply(b *testing.B) *exec.Cmd {
	b.Helper()
	return mustCmd(b, tendBin, append([]string{"apply"}, n.flags...)...)
}

// command returns argv as a command whose output goes to two
// *bytes.Buffer.
func command(argv0 string, args ...string) *exec.Cmd {
	cmd := exec.Command(argv0, args...)
	cmd.Env = append(os.Environ(), "TEND_CONFIG=")
	cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, &bytes.Buffer{}
	return cmd
}

// mustCmd runs argv to completion and returns the finished command, with
// its standard error in a *bytes.Buffer.
func mustCmd(b *testing.B, argv0 string, args ...string) *exec.Cmd {
	b.Helper()
	cmd := command(argv0, args...)
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v\n%s%s", argv0, args, err, cmd.Stdout, cmd.Stderr)
	}
	return cmd
}

// wipe removes p and syncs the file systems.
func wipe(b *testing.B, p string) {
	b.Helper()
	if err := os.RemoveAll(p); err != nil {
		b.Fatal(err)
	}
	syscall.Sync()
}

// peakRSS runs cmd to completion and returns the peak resident set size
// of its process in MB: VmHWM from /proc/PID/status, read every 5 ms while
// it runs (the high-water mark only grows, so the last read is the peak
// but for the last few ms). Not rusage's ru_maxrss: Go starts a child
// with vfork (CLONE_VM), and on exec Linux records the high-water mark of
// the memory it leaves, the parent's, as the child's, so ru_maxrss is
// never below the test process's own peak.
func peakRSS(b *testing.B, cmd *exec.Cmd) float64 {
	b.Helper()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var kib int64
	for {
		kib = max(kib, vmHWM(status))
		select {
		case err := <-done:
			if err != nil {
				b.Fatalf("%v: %v\n%s%s", cmd.Args, err, cmd.Stdout, cmd.Stderr)
			}
			if kib == 0 {
				b.Skip("no VmHWM in /proc/PID/status on this system")
			}
			return float64(kib) * 1024 / 1e6
		case <-tick.C:
		}
	}
}

// vmHWM returns the VmHWM of a /proc/PID/status file in KiB, or 0 when
// it cannot be read or the process is not a child of this one (its PID
// was reused after it exited).
func vmHWM(status string) int64 {
	data, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	var ppid, kib int64
	for line := range strings.Lines(string(data)) {
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimSuffix(strings.TrimSpace(value), " kB")
		switch name {
		case "PPid":
			ppid, _ = strconv.ParseInt(value, 10, 64)
		case "VmHWM":
			kib, _ = strconv.ParseInt(value, 10, 64)
		}
	}
	if ppid != int64(os.Getpid()) {
		return 0
	}
	return kib
}

func timed(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
