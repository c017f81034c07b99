package hub

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tend-dev/tend/api"
	"github.com/tend-dev/tend/internal/testkit/testpg"
)

// benchFleet is how many devices the benchmarks simulate.
const benchFleet = 10000

// benchDoc is the report of device i of the benchmarks' fleet, in wave
// 0 (a tenth of it) or 1, at revision rev: three models, the detector at
// tag and digest, running release applied and working towards target.
func benchDoc(i int, rev string, applied, target api.ReleaseKey, tag, digest string, at time.Time) api.Status {
	wave := min(i%10, 1)
	return api.Status{FormatVersion: api.FormatVersion, Device: fmt.Sprintf("cam-%05d", i), AppliedRevision: rev,
		LastReconcile: at.Format(time.RFC3339Nano), Labels: map[string]string{"site": fmt.Sprint("site-", i%20)}, Wave: &wave,
		AppliedRelease: string(applied), Release: &api.Release{Key: string(target), Revision: rev, Resources: detector(tag, digest)},
		Resources: []api.ResourceStatus{{ID: "file:/etc/a", State: api.ResourceOK}, {ID: "model/detector", State: api.ResourceOK},
			{ID: "model/tracker", State: api.ResourceOK}, {ID: "model/reid", State: api.ResourceOK}}}
}

// seedFleet ingests one report of each of n devices, each running the
// first commit with its three models.
func seedFleet(b *testing.B, store *Store, n int, at time.Time) {
	b.Helper()
	for i := range n {
		s := benchDoc(i, rev1, commit1, commit1, "1.0.0", digest100, at)
		_, err := store.Ingest(context.Background(), &s, at)
		require.NoError(b, err)
	}
}

// benchStores runs fn on a hub store in SQLite, and in a fresh database
// of the package's PostgreSQL server (testpg; skipped where it cannot
// run).
func benchStores(b *testing.B, fn func(b *testing.B, store *Store)) {
	for _, db := range []struct {
		name string
		dsn  func(b *testing.B) string
	}{
		{"sqlite", func(b *testing.B) string { return "sqlite://" + filepath.Join(b.TempDir(), "hub.db") }},
		{"postgres", func(b *testing.B) string { return testpg.Database(b) }},
	} {
		b.Run(db.name, func(b *testing.B) {
			store, err := Open(context.Background(), db.dsn(b))
			require.NoError(b, err)
			defer store.Close()
			fn(b, store)
		})
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIngest takes reports of a 10,000-device fleet of three models
// each, each device moving to a new release of one model (a new digest
// of its detector, pushed as a tag), and reports the p99 of one report
// and the cores of this process a fleet reporting every 60 s keeps busy
// (on PostgreSQL the database server's own CPU is not counted).
func BenchmarkIngest(b *testing.B) { benchStores(b, benchIngest) }

func benchIngest(b *testing.B, store *Store) {
	defer store.Close()
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	seedFleet(b, store, benchFleet, t0)
	lat := make([]time.Duration, 0, b.N)
	cpu := cpuTime(b)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		at := t0.Add(time.Duration(i+1) * time.Millisecond)
		s := benchDoc(i%benchFleet, rev1, model120, model120, "1.2.0", digest120, at)
		start := time.Now()
		if _, err := store.Ingest(context.Background(), &s, at); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	perReport := (cpuTime(b) - cpu) / time.Duration(len(lat))
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(perReport.Seconds()*benchFleet/60, "cores@60s")
}

// BenchmarkFleetPage renders the first page of the fleet page of 10,000
// devices, sorted by state.
func BenchmarkFleetPage(b *testing.B) { benchStores(b, benchFleetPage) }

func benchFleetPage(b *testing.B, store *Store) {
	seedFleet(b, store, benchFleet, time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	srv, err := NewServer(store, Options{PublicRead: true})
	require.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/?sort=state&selector=site%3Dsite-3", nil))
		if w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}

// BenchmarkVerdict judges a release of a model digest in wave 0 of a
// 10,000-device fleet of three models each, a tenth of it in wave 0 and
// running it, the rest held, over HTTP with a device's token; it reports
// the p99 of one verdict.
func BenchmarkVerdict(b *testing.B) { benchStores(b, benchVerdict) }

func benchVerdict(b *testing.B, store *Store) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	seedFleet(b, store, benchFleet, at)
	for i := range benchFleet {
		s := benchDoc(i, rev1, model120, model120, "1.2.0", digest120, at.Add(time.Second))
		if i%10 != 0 {
			s = benchDoc(i, rev1, commit1, model120, "1.2.0", digest120, at.Add(time.Second))
			s.Held = "held: brakes: 0 of 1000 wave-0 devices ran model/detector@sha256:cccccccccccc… healthy for 10m0s (minApplied 100)"
		}
		_, err := store.Ingest(context.Background(), &s, at.Add(time.Second))
		require.NoError(b, err)
	}
	tok, err := store.CreateToken(context.Background(), "cam-00001", at)
	require.NoError(b, err)
	srv, err := NewServer(store, Options{ReadToken: "read", Now: func() time.Time { return at.Add(time.Hour) }})
	require.NoError(b, err)
	path := "/v1/verdict?" + api.VerdictQuery{Release: model120, Revision: rev1, Before: 1, Thresholds: api.Thresholds{MinApplied: 100, Soak: 10 * time.Minute}}.Encode()
	var lat []time.Duration
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		start := time.Now()
		srv.ServeHTTP(w, req)
		lat = append(lat, time.Since(start))
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"go": true`) || !strings.Contains(w.Body.String(), `"applied": 1000`) {
			b.Fatal(w.Code, w.Body.String())
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkIngestWhileOneFloods takes the reports of a 10,000-device
// fleet, as BenchmarkIngest, while one device posts, back to back,
// reports of 64 made-up rolled back releases each: it reports the p99 of
// a normal report (the bound is 50 ms) and how many flood reports
// were taken meanwhile.
func BenchmarkIngestWhileOneFloods(b *testing.B) { benchStores(b, benchIngestFlood) }

func benchIngestFlood(b *testing.B, store *Store) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	seedFleet(b, store, benchFleet, t0)
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		defer func() { done <- n }()
		for ; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			s := benchDoc(benchFleet, rev1, commit1, commit1, "1.0.0", digest100, t0.Add(time.Duration(n+1)*time.Millisecond))
			for i := range api.MaxReportQuarantined {
				c := fmt.Sprintf("main@sha1:%040x", n*api.MaxReportQuarantined+i)
				s.Quarantined = append(s.Quarantined, api.Quarantined{Release: c, Revision: c, Reason: "made up"})
			}
			if _, err := store.Ingest(context.Background(), &s, t0); err != nil {
				b.Error(err)
				return
			}
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		at := t0.Add(time.Duration(i+1) * time.Millisecond)
		s := benchDoc(i%benchFleet, rev1, model120, model120, "1.2.0", digest120, at)
		start := time.Now()
		if _, err := store.Ingest(context.Background(), &s, at); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	close(stop)
	flood := <-done
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(flood)/float64(len(lat)), "flood/report")
}
