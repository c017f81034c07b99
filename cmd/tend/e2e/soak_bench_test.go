package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
)

// soakTicks is how many ticks BenchmarkAgentSoak runs the agent through.
var soakTicks = envInt("TEND_SOAK_TICKS", 1000)

// BenchmarkAgentSoak runs `tend agent` (Git over smart HTTP, a model from
// an OCI registry, 20 files and a service that depends on both) through
// 1,000 ticks, each asked for with POST /reconcile as soon as the last
// ended: a new commit every 25 (every fourth one switching the
// model), a file changed by hand every 10 and the service killed with
// SIGKILL every 50. It reports the agent's resident memory, open file
// descriptors and goroutines after tick 200 and after the last (from its
// own /metrics) and fails when the descriptors or goroutines grew: a leak
// per tick would show as hundreds.
func BenchmarkAgentSoak(b *testing.B) {
	for b.Loop() {
		start, end := soak(b, soakTicks)
		b.ReportMetric(start.rss/(1<<20), "rss-MB-t200")
		b.ReportMetric(end.rss/(1<<20), "rss-MB-end")
		b.ReportMetric(start.fds, "fds-t200")
		b.ReportMetric(end.fds, "fds-end")
		b.ReportMetric(start.goroutines, "goroutines-t200")
		b.ReportMetric(end.goroutines, "goroutines-end")
		b.ReportMetric(end.drift, "drifts")
		b.ReportMetric(end.restarts, "restarts")
		if end.drift == 0 || end.restarts == 0 {
			b.Errorf("the soak saw no drift (%v) or no service restart (%v)", end.drift, end.restarts)
		}
		if end.fds > start.fds+4 || end.goroutines > start.goroutines+10 {
			b.Errorf("the agent leaks: from tick 200 to %d, fds %v → %v, goroutines %v → %v", soakTicks, start.fds, end.fds, start.goroutines, end.goroutines)
		}
	}
}

// agentSample is what the agent's /metrics says of it.
type agentSample struct {
	ticks, rss, fds, goroutines float64
	drift, restarts             float64 // drift events seen, service restarts made
}

// soak runs the soak of BenchmarkAgentSoak for ticks ticks and returns
// the samples after tick 200 and after the last.
func soak(b *testing.B, ticks int) (start, end agentSample) {
	prog := svcProg(b)
	reg := testoci.Start(b)
	reg.PushFiles(b, "models/detector:v1", map[string][]byte{"labels.txt": []byte("v1\n"), "model.onnx": make([]byte, 1<<20)})
	reg.PushFiles(b, "models/detector:v2", map[string][]byte{"labels.txt": []byte("v2\n"), "model.onnx": make([]byte, 1<<20)})
	repo := testgit.NewRepo(b)
	srv := testgit.StartHTTP(b, filepath.Dir(repo.Dir()))
	commit := func(gen int) {
		tag := "v1"
		if gen/4%2 == 1 {
			tag = "v2"
		}
		var doc strings.Builder
		fmt.Fprintf(&doc, "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n")
		fmt.Fprintf(&doc, "  models:\n    - {name: detector, ref: %s, path: /opt/models/detector}\n", reg.Ref("models/detector:"+tag))
		fmt.Fprintf(&doc, "  files:\n    - {path: /etc/infer/config.yaml, content: \"generation %d\\n\"}\n", gen)
		for i := range 20 {
			fmt.Fprintf(&doc, "    - {path: /etc/infer/f%02d.yaml, content: \"value %d\\n\"}\n", i, i)
		}
		cmd, _ := json.Marshal([]string{prog, "${model:detector}/labels.txt", "${file:/etc/infer/config.yaml}"})
		fmt.Fprintf(&doc, "  services:\n    - {name: infer, command: %s, stopTimeout: 2s}\n", cmd)
		repo.WriteFile("devices/cam-017/device.yaml", doc.String())
		repo.Commit(fmt.Sprintf("generation %d", gen))
	}
	commit(0)

	n := agentBenchNode(b, repo.URL(srv.URL))
	addr := freeAddr(b)
	startBenchAgent(b, n, "--schedule", "@every 1h", "--allow-path", "/opt/models", "--insecure-registry", reg.Host, "--listen", addr)
	sample := func() agentSample {
		s, ok := scrape(addr)
		if !ok {
			return agentSample{ticks: -1}
		}
		return s
	}
	waitFor(b, func() bool { return sample().ticks >= 1 })
	gen, began := 0, time.Now()
	for tick := 1; tick <= ticks; tick++ {
		switch {
		case tick%25 == 0:
			gen++
			commit(gen)
		case tick%10 == 0:
			if err := os.WriteFile(filepath.Join(n.root, "etc/infer/f00.yaml"), []byte("changed by hand\n"), 0o644); err != nil {
				b.Fatal(err)
			}
		case tick%50 == 5:
			if pid := servicePID(b, n.state, "infer"); pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		before := sample().ticks
		resp, err := http.Post("http://"+addr+"/reconcile", "", nil) // a tick now
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		waitFor(b, func() bool { return sample().ticks > before })
		if tick%100 == 0 {
			b.Logf("tick %d at %s", tick, time.Since(began).Round(time.Millisecond))
		}
		switch tick {
		case 200:
			start = sample()
		case ticks:
			end = sample()
		}
	}
	return start, end
}

// scrape reads the agent's ticks so far (tend_reconcile_total, every
// result), resident memory, open descriptors and goroutines from its
// /metrics.
func scrape(addr string) (agentSample, bool) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return agentSample{}, false
	}
	defer resp.Body.Close()
	var s agentSample
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, "tend_reconcile_total{"):
			s.ticks += v
		case name == "process_resident_memory_bytes":
			s.rss = v
		case name == "process_open_fds":
			s.fds = v
		case name == "go_goroutines":
			s.goroutines = v
		case strings.HasPrefix(name, "tend_drift_total{"):
			s.drift += v
		case strings.HasPrefix(name, "tend_service_restarts_total{"):
			s.restarts += v
		}
	}
	return s, sc.Err() == nil
}

// envInt is the integer in $name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
