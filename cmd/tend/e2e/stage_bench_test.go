package e2e

// Benchmark of staged releases: a real `tend agent` staging a 1 GiB model
// from CNCF distribution (Debian's docker-registry) behind a slow link,
// while its ticks keep the node converged, and then activating it with
// nothing left to download. make bench installs oras, which pushes the
// model.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/internal/testkit/testserver"
)

const (
	// stageInterval is the agent's tick interval in BenchmarkStagingRevert.
	stageInterval = 2 * time.Second
	// stageRate is the slow link's rate: the 1 GiB model stages in about
	// 21 s, long enough for the hand edits (about one interval each) to
	// all fall inside the staging.
	stageRate = 48 << 20
	// stageEdits is how many hand edits are reverted during the staging.
	stageEdits = 5
)

// BenchmarkStagingRevert runs `tend agent` (ticking every 2 s) on a device
// with one managed file, and commits a release that adds a 1 GiB
// single-file model, served through a link of 48 MiB/s (an in-process
// throttling proxy in front of docker-registry), and a Rollout whose gate
// holds the release until the benchmark opens it.
//
// While the model stages (as /status says: bytes < totalBytes), the
// managed file is edited by hand five times, each at another phase of the
// tick cycle ((i+½)/5 of an interval after the last revert), and the time
// until the file's content is back is measured (polled every 10 ms):
// revert-p50-ms, revert-max-ms, interval-ms and max/interval (target:
// max ≤ interval + 1 s; a tick never waits for the download).
//
// Once the release is staged (/status: bytes == totalBytes) and a held
// tick has passed, the gate opens and POST /reconcile asks for a tick:
// activate-ms is the time from the POST until the model's stable path
// appears (polled every 1 ms; target < 1 s), activate-blob-bytes the blob
// bytes the link served from the gate's opening to the end of that tick
// (target 0), activate-net-bytes the bytes of every response body it
// served then (manifests and blobs). rss-MB is the agent's peak resident set size (VmHWM at the
// end; target < 60 MB: the download streams), stage-s the time from the
// commit to the release staged.
func BenchmarkStagingRevert(b *testing.B) {
	oras := orasCLI(b)
	host := testoci.StartDistribution(b)
	src := b.TempDir()
	writeRandom(b, filepath.Join(src, "model.bin"), 1<<30, 6)
	orasRun(b, oras, src, "push", "--plain-http", host+"/models/large:v1", "model.bin")
	wipe(b, src) // the registry has its own copy
	link := startSlowLink(b, host, stageRate)
	gate := startGate(b)

	for b.Loop() {
		gate.open.Store(false)
		a := startStagingAgent(b, link.host, gate.url)
		file := filepath.Join(a.root, "etc/infer/config.yaml")
		stable := filepath.Join(a.root, "opt/models/large")
		want := "threshold: 0.4\n"
		a.await("the first commit applied", 30*time.Second, func() bool { return readString(file) == want })

		a.repo.WriteFile("devices/cam-017/device.yaml", stagingDevice(link.host+"/models/large:v1", want))
		a.repo.Commit("large model")
		committed := time.Now()
		a.await("the model staging", 30*time.Second, func() bool {
			st := a.staging()
			return st != nil && st.Bytes > 0 && st.Bytes < st.TotalBytes
		})

		// The edits: each at another phase of the tick cycle, counted
		// from the end of the last tick (the revert just seen, or for the
		// first edit the end of the next tick).
		ticks := a.ticks()
		a.await("a tick", 3*stageInterval, func() bool { return a.ticks() > ticks })
		last := time.Now()
		var reverts []time.Duration
		for i := range stageEdits {
			time.Sleep(time.Until(last.Add(stageInterval * time.Duration(2*i+1) / (2 * stageEdits))))
			if err := os.WriteFile(file, []byte("threshold: 0.99\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			edited := time.Now()
			for readString(file) != want {
				if time.Since(edited) > 10*stageInterval {
					b.Fatalf("hand edit %d not reverted within %s during the staging\n%s", i+1, 10*stageInterval, a.logTail())
				}
				time.Sleep(10 * time.Millisecond)
			}
			last = time.Now()
			reverts = append(reverts, last.Sub(edited))
		}
		if st := a.staging(); st == nil || st.Bytes >= st.TotalBytes {
			b.Fatalf("the staging ended before the last revert (%+v): lower stageRate so that every edit falls inside it", st)
		}

		a.await("the release staged", 5*time.Minute, func() bool {
			st := a.staging()
			return st != nil && st.TotalBytes > 0 && st.Bytes == st.TotalBytes && st.Error == ""
		})
		staged := time.Since(committed)
		if _, err := os.Lstat(stable); err == nil {
			b.Fatal("the model was activated while the gate was closed")
		}

		// Activation: after a held tick, so that none is under way.
		ticks = a.ticks()
		a.await("a held tick", 3*stageInterval, func() bool { return a.ticks() > ticks })
		ticks = a.ticks()
		blob0, net0 := link.blobBytes.Load(), link.netBytes.Load()
		gate.open.Store(true)
		posted := time.Now()
		resp, err := http.Post("http://"+a.addr+"/reconcile", "", nil)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		for {
			if _, err := os.Lstat(stable); err == nil {
				break
			}
			if time.Since(posted) > 30*time.Second {
				b.Fatalf("the staged model was not activated within 30 s\n%s", a.logTail())
			}
			time.Sleep(time.Millisecond)
		}
		activate := time.Since(posted)
		a.await("the activating tick's end", 30*time.Second, func() bool { return a.ticks() > ticks })
		blobs, netBytes := link.blobBytes.Load()-blob0, link.netBytes.Load()-net0
		if fi, err := os.Stat(filepath.Join(stable, "model.bin")); err != nil || fi.Size() != 1<<30 {
			b.Fatalf("the activated model is not whole: %v, %v", fi, err)
		}
		rss := float64(vmHWM(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))) * 1024 / 1e6

		slices.Sort(reverts)
		b.ReportMetric(millis(reverts[len(reverts)/2]), "revert-p50-ms")
		b.ReportMetric(millis(reverts[len(reverts)-1]), "revert-max-ms")
		b.ReportMetric(millis(stageInterval), "interval-ms")
		b.ReportMetric(float64(reverts[len(reverts)-1])/float64(stageInterval), "max/interval")
		b.ReportMetric(rss, "rss-MB")
		b.ReportMetric(staged.Seconds(), "stage-s")
		b.ReportMetric(millis(activate), "activate-ms")
		b.ReportMetric(float64(blobs), "activate-blob-bytes")
		b.ReportMetric(float64(netBytes), "activate-net-bytes")
		a.stop(b)
	}
}

// stagingDevice declares the managed file with content and, with a ref,
// the model large at ref with its stable path /opt/models/large.
func stagingDevice(ref, content string) string {
	doc := "apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: cam-017}\nspec:\n"
	if ref != "" {
		doc += fmt.Sprintf("  models:\n    - {name: large, ref: %s, path: /opt/models/large}\n", ref)
	}
	return doc + fmt.Sprintf("  files:\n    - {path: /etc/infer/config.yaml, content: %q}\n", content)
}

// stagingAgent is a `tend agent` ticking every stageInterval, with its
// status server, for a device whose fleet repo holds the managed file and
// a Rollout gated by gateURL.
type stagingAgent struct {
	b          *testing.B
	repo       *testgit.Repo
	root, addr string
	cmd        *exec.Cmd
	log        *syncBuffer
}

func startStagingAgent(b *testing.B, registry, gateURL string) *stagingAgent {
	b.Helper()
	a := &stagingAgent{b: b, repo: testgit.NewRepo(b), addr: testserver.FreeAddr(b), log: &syncBuffer{}}
	a.repo.WriteFile("devices/cam-017/device.yaml", stagingDevice("", "threshold: 0.4\n"))
	a.repo.WriteFile("devices/cam-017/rollout.yaml", "apiVersion: tend.dev/v1alpha1\nkind: Rollout\nmetadata: {name: gated}\n"+
		"spec:\n  selector: {}\n  gate: {url: \""+gateURL+"\"}\n")
	a.repo.Commit("managed file")
	dir := b.TempDir()
	a.root = filepath.Join(dir, "root")
	if err := os.MkdirAll(a.root, 0o755); err != nil {
		b.Fatal(err)
	}
	cfg := filepath.Join(dir, "none.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: tend.dev/v1alpha1\nkind: AgentConfig\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	a.cmd = command(tendBin, "agent", "--repo", a.repo.Dir(), "--device", "cam-017", "--path", "devices/{device}",
		"--root", a.root, "--state-dir", filepath.Join(dir, "state"), "--allow-path", "/etc/infer", "--allow-path", "/opt/models",
		"--insecure-registry", registry, "--log-format", "json", "--config", cfg,
		"--schedule", "@every "+stageInterval.String(), "--jitter", "0s", "--listen", a.addr)
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.cmd.Process.Kill(); _ = a.cmd.Wait() })
	return a
}

// stagingStatus is the staging of the agent's /status.
type stagingStatus struct {
	Bytes      int64  `json:"bytes"`
	TotalBytes int64  `json:"totalBytes"`
	Error      string `json:"error"`
}

// staging returns the staging /status shows, nil without one or while
// the status server does not answer.
func (a *stagingAgent) staging() *stagingStatus {
	resp, err := http.Get("http://" + a.addr + "/status")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var s struct {
		Staging *stagingStatus `json:"staging"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return nil
	}
	return s.Staging
}

// ticks is the number of ticks the agent logged as reconciled.
func (a *stagingAgent) ticks() int {
	return bytes.Count(a.log.Bytes(), []byte(`"msg":"reconciled"`))
}

// await polls ok every 10 ms until it holds, or fails the benchmark
// after within, saying what it waited for.
func (a *stagingAgent) await(what string, within time.Duration, ok func() bool) {
	a.b.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			a.b.Fatalf("%s: not within %s\n%s", what, within, a.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logTail is the end of the agent's log.
func (a *stagingAgent) logTail() []byte {
	log := a.log.Bytes()
	return log[max(0, len(log)-8<<10):]
}

// stop ends the agent with SIGTERM.
func (a *stagingAgent) stop(b *testing.B) {
	b.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	_ = a.cmd.Wait()
}

// syncBuffer is a bytes.Buffer that a child process's output goroutine
// writes while the benchmark reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// Bytes returns a copy of what was written so far.
func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.buf.Bytes())
}

// readString returns the content of p, "" if it cannot be read.
func readString(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// gateServer is a rollout gate: 200 once open, 503 until then.
type gateServer struct {
	url  string
	open atomic.Bool
}

func startGate(t testing.TB) *gateServer {
	g := &gateServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !g.open.Load() {
			http.Error(w, "closed", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	g.url = srv.URL + "/go"
	return g
}

// slowLink is a reverse proxy in front of a registry that sends the
// bodies of its responses at most rate bytes per second in all, as one
// slow link would, and counts the bytes it sent.
type slowLink struct {
	host      string // host:port to reach the registry through the link
	pace      pacer
	netBytes  atomic.Int64 // every response body
	blobBytes atomic.Int64 // the bodies of blob GETs
}

// slowChunk is the most a slowLink sends at once.
const slowChunk = 64 << 10

func startSlowLink(b *testing.B, registry string, rate float64) *slowLink {
	l := &slowLink{pace: pacer{rate: rate}}
	target := &url.URL{Scheme: "http", Host: registry}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		ModifyResponse: func(resp *http.Response) error {
			req := resp.Request
			blob := req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/")
			resp.Body = &slowBody{ReadCloser: resp.Body, ctx: req.Context(), link: l, blob: blob}
			return nil
		},
	}
	srv := httptest.NewServer(proxy)
	b.Cleanup(srv.Close)
	l.host = strings.TrimPrefix(srv.URL, "http://")
	return l
}

// slowBody is a response body sent through a slowLink.
type slowBody struct {
	io.ReadCloser
	ctx  context.Context
	link *slowLink
	blob bool
}

func (s *slowBody) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p[:min(len(p), slowChunk)])
	if n > 0 {
		if werr := s.link.pace.wait(s.ctx, n); werr != nil {
			return 0, werr
		}
		s.link.netBytes.Add(int64(n))
		if s.blob {
			s.link.blobBytes.Add(int64(n))
		}
	}
	return n, err
}

// pacer spaces bytes at rate bytes per second, shared by every response
// of a link: a token bucket whose burst is what the link sends in
// pacerBurst (so a timer that fires late does not slow the link down).
type pacer struct {
	rate float64
	mu   sync.Mutex
	next time.Time // when the bytes already let through have all gone
}

// pacerBurst is how far a pacer lets its bytes catch up on time lost.
const pacerBurst = 50 * time.Millisecond

// wait blocks until n more bytes may go, or ctx is done.
func (p *pacer) wait(ctx context.Context, n int) error {
	p.mu.Lock()
	if early := time.Now().Add(-pacerBurst); p.next.Before(early) {
		p.next = early
	}
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	at := p.next
	p.mu.Unlock()
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
