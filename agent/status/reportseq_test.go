package status

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
)

var epochRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// sentSeqs are the reportSeqs of the posts c received.
func sentSeqs(t *testing.T, c *reportCollector) []ReportSeq {
	t.Helper()
	var out []ReportSeq
	for _, p := range c.received() {
		s := decodeReported(t, p.body)
		require.NotNil(t, s.ReportSeq, "%s", p.body)
		out = append(out, *s.ReportSeq)
	}
	return out
}

// readSeq is the reportSeq report.json in dir holds.
func readSeq(t *testing.T, dir string) ReportSeq {
	t.Helper()
	var c reportCache
	ok, err := statedir.ReadJSON(statedir.Dir(dir).Report(), &c)
	require.NoError(t, err)
	require.True(t, ok, "report.json written")
	return ReportSeq{Epoch: c.Epoch, Seq: c.Seq}
}

// Every post carries reportSeq: the stateDir's epoch, made once and kept
// across restarts, and a seq that rises with every post and is in
// report.json before the post goes out. GET /status does not carry it,
// and the content a report is resent for ignores it.
func TestReporterNumbersReports(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var mu sync.Mutex
	var atArrival []ReportSeq // report.json's reportSeq as each post arrived
	c := newReportCollector(t, func(int, http.ResponseWriter) {
		seq := readSeq(t, dir)
		mu.Lock()
		atArrival = append(atArrival, seq)
		mu.Unlock()
	})
	cfg := manifest.Report{URL: c.URL, Interval: manifest.Duration(time.Hour)}
	r, _ := newTestReporter(t, cfg, dir)
	a, b := newReportStatus("main@sha1:aaaa").get(), newReportStatus("main@sha1:bbbb").get()
	for _, s := range []Status{a, b, a} {
		require.NoError(t, r.post(context.Background(), s))
		assert.Nil(t, s.ReportSeq, "the status itself does not carry it")
	}
	seqs := sentSeqs(t, c)
	require.Len(t, seqs, 3)
	epoch := seqs[0].Epoch
	assert.Regexp(t, epochRE, epoch)
	assert.Equal(t, []ReportSeq{{Epoch: epoch, Seq: 1}, {Epoch: epoch, Seq: 2}, {Epoch: epoch, Seq: 3}}, seqs)
	mu.Lock()
	assert.Equal(t, seqs, atArrival, "each seq is kept before its post goes out")
	mu.Unlock()
	assert.Positive(t, r.wait(a, time.Time{}), "the last accepted content, numbered, is the status's: not resent before the interval")

	t.Run("a restart goes on from the seq kept", func(t *testing.T) {
		r2, _ := newTestReporter(t, cfg, dir)
		require.NoError(t, r2.post(context.Background(), b))
		seqs := sentSeqs(t, c)
		assert.Equal(t, ReportSeq{Epoch: epoch, Seq: 4}, seqs[len(seqs)-1])
	})
	t.Run("another stateDir has another epoch", func(t *testing.T) {
		r3, _ := newTestReporter(t, cfg, t.TempDir())
		require.NoError(t, r3.post(context.Background(), b))
		seqs := sentSeqs(t, c)
		last := seqs[len(seqs)-1]
		assert.Regexp(t, epochRE, last.Epoch)
		assert.NotEqual(t, epoch, last.Epoch)
		assert.Equal(t, uint64(1), last.Seq)
	})
	t.Run("a cache an older tend wrote gets an epoch and keeps its fingerprint", func(t *testing.T) {
		old := t.TempDir()
		accepted := time.Now().UTC().Truncate(time.Second)
		body, _ := json.Marshal(map[string]any{"fingerprint": a.Fingerprint(), "acceptedAt": accepted})
		require.NoError(t, os.WriteFile(statedir.Dir(old).Report(), body, 0o644))
		r4, _ := newTestReporter(t, cfg, old)
		assert.Positive(t, r4.wait(a, time.Time{}), "not resent at once")
		require.NoError(t, r4.post(context.Background(), b))
		kept := readSeq(t, old)
		assert.Regexp(t, epochRE, kept.Epoch)
		assert.Equal(t, uint64(1), kept.Seq)
	})
}

// A stateDir where report.json cannot be written (a full disk; here a
// file where the folder was) does not stop the reports: they go out
// under an epoch kept in memory, made anew whenever the epoch on disk
// would be used past its seq there, so that no seq of an epoch ever goes
// out twice, across a restart too.
func TestReporterNumbersReportsItCannotKeep(t *testing.T) {
	t.Parallel()
	c := newReportCollector(t, nil)
	dir := t.TempDir()
	cfg := manifest.Report{URL: c.URL, Interval: manifest.Duration(time.Hour)}
	r, logs := newTestReporter(t, cfg, dir)
	s := newReportStatus("main@sha1:aaaa").get()
	post := func() ReportSeq {
		t.Helper()
		require.NoError(t, r.post(context.Background(), s))
		seqs := sentSeqs(t, c)
		return seqs[len(seqs)-1]
	}
	unwritable := func() {
		require.NoError(t, os.RemoveAll(dir))
		require.NoError(t, os.WriteFile(dir, []byte("not a folder"), 0o644))
	}
	writable := func() {
		require.NoError(t, os.Remove(dir))
		require.NoError(t, os.Mkdir(dir, 0o755))
	}

	e := post()
	assert.Equal(t, uint64(1), e.Seq)
	unwritable()
	f1 := post()
	assert.NotEqual(t, e.Epoch, f1.Epoch, "e's seq 2 could go out again after a restart")
	assert.Regexp(t, epochRE, f1.Epoch)
	assert.Equal(t, uint64(1), f1.Seq)
	assert.Equal(t, ReportSeq{Epoch: f1.Epoch, Seq: 2}, post(), "an epoch on no disk goes on")
	assert.Contains(t, logs.String(), "cannot keep the report's sequence number")

	writable()
	assert.Equal(t, ReportSeq{Epoch: f1.Epoch, Seq: 3}, post())
	assert.Equal(t, ReportSeq{Epoch: f1.Epoch, Seq: 3}, readSeq(t, dir))
	unwritable()
	g := post()
	assert.NotContains(t, []string{e.Epoch, f1.Epoch}, g.Epoch, "f is on disk at seq 3 now")
	assert.Equal(t, uint64(1), g.Seq)
	warned := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "cannot keep the report's sequence number") {
			warned++
		}
	}
	assert.Equal(t, 2, warned, "warned as the epoch on disk could not go on, not at every post:\n%s", logs)

	writable()
	data, err := json.Marshal(map[string]any{"formatVersion": "2", "epoch": f1.Epoch, "seq": 3})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(statedir.Dir(dir).Report(), data, 0o644)) // as it was on disk
	restarted, _ := newTestReporter(t, cfg, dir)
	require.NoError(t, restarted.post(context.Background(), s))
	seqs := sentSeqs(t, c)
	last := seqs[len(seqs)-1]
	assert.Equal(t, ReportSeq{Epoch: f1.Epoch, Seq: 4}, last)
	for _, earlier := range seqs[:len(seqs)-1] {
		assert.NotEqual(t, last, earlier, "no seq of an epoch goes out twice")
	}
}

// A node that rolled back more releases than a collector takes in one
// report posts the newest of them; its status keeps them all.
func TestReporterPostsTheNewestQuarantined(t *testing.T) {
	t.Parallel()
	c := newReportCollector(t, func(int, http.ResponseWriter) {})
	r, _ := newTestReporter(t, manifest.Report{URL: c.URL, Interval: manifest.Duration(time.Hour)}, t.TempDir())
	s := newReportStatus("main@sha1:aaaa").get()
	for i := range MaxReportQuarantined + 6 {
		s.Quarantined = append(s.Quarantined, Quarantined{Release: fmt.Sprintf("main@sha1:%040x", i), Reason: "health check failed"})
	}
	require.NoError(t, r.post(context.Background(), s))
	require.Len(t, s.Quarantined, MaxReportQuarantined+6)
	got := decodeReported(t, c.received()[0].body).Quarantined
	require.Len(t, got, MaxReportQuarantined)
	assert.Equal(t, fmt.Sprintf("main@sha1:%040x", 6), got[0].Release, "the oldest left out")
	assert.Equal(t, s.Quarantined[len(s.Quarantined)-1], got[len(got)-1])
}
