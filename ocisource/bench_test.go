package ocisource_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tend-dev/tend/gitsource"
	"github.com/tend-dev/tend/internal/testkit/testgit"
	"github.com/tend-dev/tend/internal/testkit/testmeter"
	"github.com/tend-dev/tend/internal/testkit/testoci"
	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/ocisource"
	"github.com/tend-dev/tend/source"
)

// processCPU is the CPU time process pid used so far.
func processCPU(b *testing.B, pid int) time.Duration {
	d, err := testmeter.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return d
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
	paths := []source.Path{{Dir: "devices/dev-0500", PerDevice: true}}
	type result struct {
		cpu             time.Duration
		requests, bytes float64
	}
	gitPoll := func(b *testing.B, branches int) result {
		repo, commit := benchFleet(b, 1000, branches)
		var m testmeter.Meter
		srv := httptest.NewServer(m.Handler(testgit.HTTPHandler(b, filepath.Dir(repo.Dir()))))
		b.Cleanup(srv.Close)
		src := gitsource.Source{URL: repo.URL(srv.URL), Ref: "main", Paths: paths}
		dir := filepath.Join(b.TempDir(), "git")
		if _, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir}); err != nil {
			b.Fatal(err)
		}
		src.LastApplied = commit
		m.Reset()
		before := testmeter.ChildrenCPU()
		for range gitPolls {
			snap, err := gitsource.Fetch(context.Background(), src, gitsource.Options{Dir: dir})
			if err != nil || snap.Fetched {
				b.Fatalf("not a no-op: %v", err)
			}
		}
		return result{(testmeter.ChildrenCPU() - before) / gitPolls, float64(m.Requests.Load()) / gitPolls, float64(m.Bytes.Load()) / gitPolls}
	}
	ociPoll := func(b *testing.B) result {
		host, pid := testoci.StartDistributionProcess(b)
		repo, commit := benchFleet(b, 1000, 0)
		if _, err := ocisource.Publish(context.Background(), openRepo(b, repo.Dir()), "main", "oci://"+host+"/fleet:main",
			ocisource.PublishOptions{Registry: transport.Options{Insecure: []string{host}}}); err != nil {
			b.Fatal(err)
		}
		var m testmeter.Meter
		client := ocisource.NewClient(transport.Options{Insecure: []string{host}, Transport: m.Transport(nil)})
		src := ocisource.Source{URL: "oci://" + host + "/fleet:main", Paths: paths}
		opts := ocisource.Options{Dir: filepath.Join(b.TempDir(), "oci"), Client: client}
		if _, err := ocisource.Fetch(context.Background(), src, opts); err != nil {
			b.Fatal(err)
		}
		src.LastApplied = commit
		m.Reset()
		before := processCPU(b, pid)
		for range ociPolls {
			snap, err := ocisource.Fetch(context.Background(), src, opts)
			if err != nil || snap.Fetched {
				b.Fatalf("not a no-op: %v", err)
			}
		}
		return result{(processCPU(b, pid) - before) / ociPolls, float64(m.Requests.Load()) / ociPolls, float64(m.Bytes.Load()) / ociPolls}
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
