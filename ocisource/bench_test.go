package ocisource_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testgit"
	"github.com/tend-dev/tend/internal/testoci"
	"github.com/tend-dev/tend/oci"
	"github.com/tend-dev/tend/ocisource"
)

// traffic counts requests and the body bytes of responses.
type traffic struct{ requests, bytes atomic.Int64 }

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// RoundTrip counts what a client is sent.
func (c *traffic) RoundTrip(r *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		resp.Body = countingBody{resp.Body, &c.bytes}
	}
	return resp, err
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	return c.ResponseWriter.Write(p)
}

// childrenCPU is the CPU time of the children of this process that ended:
// the git http-backend CGI processes.
func childrenCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the CPU time process pid used so far, from /proc.
func processCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Past the command name in parentheses: state is field 3, utime 14,
	// stime 15, in clock ticks (USER_HZ, 100 on Linux).
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// benchFleet is a fleet repo of n devices, with extra branches besides
// main (per-device branches make the ref advertisement grow).
func benchFleet(b *testing.B, devices, branches int) (*testgit.Repo, string) {
	r := testgit.NewRepo(b)
	for i := range devices {
		r.WriteFile(fmt.Sprintf("devices/dev-%04d/device.yaml", i), fmt.Sprintf(
			"apiVersion: tend.dev/v1alpha1\nkind: Device\nmetadata: {name: dev-%04d}\nspec:\n  files:\n    - {path: /etc/infer/config.yaml, content: \"threshold: 0.%d\"}\n", i, i%10))
	}
	commit := r.Commit("fleet")
	var refs strings.Builder
	for i := range branches {
		fmt.Fprintf(&refs, "create refs/heads/devices/dev-%04d %s\n", i, commit)
	}
	if branches > 0 {
		r.GitInput(refs.String(), "update-ref", "--stdin")
	}
	return r, commit
}

// BenchmarkNoopPoll measures what one no-op poll of a device costs the
// server: against the real git http-backend (a 1,000-device fleet repo,
// with main alone and with 1,000 per-device branches too) and against
// Debian's docker-registry serving the same commit published as an
// artifact. Per poll: the server's CPU time (the CGI children's for Git,
// the registry process's from /proc), the requests, and the response body
// bytes. The registry session is kept from poll to poll, as the agent
// keeps it.
func BenchmarkNoopPoll(b *testing.B) {
	const gitPolls, ociPolls = 40, 400
	paths := []gitsource.Path{{Dir: "devices/dev-0500", PerDevice: true}}
	type result struct {
		cpu             time.Duration
		requests, bytes float64
	}
	gitPoll := func(b *testing.B, branches int) result {
		repo, commit := benchFleet(b, 1000, branches)
		var requests, bytes atomic.Int64
		backend := testgit.HTTPHandler(b, filepath.Dir(repo.Dir()))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			backend.ServeHTTP(countingWriter{w, &bytes}, r)
		}))
		b.Cleanup(srv.Close)
		src := gitsource.Source{URL: repo.URL(srv.URL), Ref: "main", Paths: paths}
		dir := filepath.Join(b.TempDir(), "git")
		if _, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir}); err != nil {
			b.Fatal(err)
		}
		src.LastApplied = commit
		requests.Store(0)
		bytes.Store(0)
		before := childrenCPU(b)
		for range gitPolls {
			snap, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir})
			if err != nil || snap.Fetched {
				b.Fatalf("not a no-op: %v", err)
			}
		}
		return result{(childrenCPU(b) - before) / gitPolls, float64(requests.Load()) / gitPolls, float64(bytes.Load()) / gitPolls}
	}
	ociPoll := func(b *testing.B) result {
		host, pid := testoci.StartDistributionProcess(b)
		repo, commit := benchFleet(b, 1000, 0)
		if _, err := ocisource.Publish(context.Background(), openRepo(b, repo.Dir()), "main", "oci://"+host+"/fleet:main",
			ocisource.PublishOptions{Registry: oci.Options{Insecure: []string{host}}}); err != nil {
			b.Fatal(err)
		}
		tr := &traffic{}
		client := ocisource.NewClient(oci.Options{Insecure: []string{host}, Transport: tr})
		src := ocisource.Source{URL: "oci://" + host + "/fleet:main", Paths: paths}
		opts := ocisource.Options{Dir: filepath.Join(b.TempDir(), "oci"), Client: client}
		if _, err := ocisource.Fetch(context.Background(), src, opts); err != nil {
			b.Fatal(err)
		}
		src.LastApplied = commit
		tr.requests.Store(0)
		tr.bytes.Store(0)
		before := processCPU(b, pid)
		for range ociPolls {
			snap, err := ocisource.Fetch(context.Background(), src, opts)
			if err != nil || snap.Fetched {
				b.Fatalf("not a no-op: %v", err)
			}
		}
		return result{(processCPU(b, pid) - before) / ociPolls, float64(tr.requests.Load()) / ociPolls, float64(tr.bytes.Load()) / ociPolls}
	}
	for b.Loop() {
		git1, gitMany, reg := gitPoll(b, 0), gitPoll(b, 1000), ociPoll(b)
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		b.ReportMetric(ms(git1.cpu), "git-cpu-ms/poll")
		b.ReportMetric(git1.requests, "git-req/poll")
		b.ReportMetric(git1.bytes, "git-B/poll")
		b.ReportMetric(ms(gitMany.cpu), "git1001refs-cpu-ms/poll")
		b.ReportMetric(gitMany.requests, "git1001refs-req/poll")
		b.ReportMetric(gitMany.bytes, "git1001refs-B/poll")
		b.ReportMetric(ms(reg.cpu), "oci-cpu-ms/poll")
		b.ReportMetric(reg.requests, "oci-req/poll")
		b.ReportMetric(reg.bytes, "oci-B/poll")
		b.ReportMetric(float64(reg.cpu)/float64(git1.cpu), "oci/git-cpu")
	}
}
