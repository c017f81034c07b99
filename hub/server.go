package hub

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tend-dev/tend/api"
)

// MaxReportBytes caps the body of one report. A status document lists a
// device's resources, services and recent drift: far less than this.
const MaxReportBytes = 1 << 20

// Log keys.
const (
	keyDevice = "device"
	keyResult = "result"
	keyError  = "error"
	keyRemote = "remote"
)

// Options configure a Server.
type Options struct {
	// ReadToken, when set, is the token reading needs (as a bearer token,
	// or the password of HTTP basic auth, which browsers ask for);
	// PublicRead lets anyone read instead. One of the two is required.
	ReadToken  string
	PublicRead bool
	Log        *slog.Logger
	Now        func() time.Time // default time.Now
	// Webhook, when set, is a URL the hub POSTs a JSON event to (with a
	// Slack-compatible text field) when brakes trip for a release or a
	// device goes into a crash loop.
	Webhook string
	// Fleet, when set, is the fleet repo (--fleet-source) from which the
	// hub works out each device's rollout and wave, rather than believe
	// its reports. Until it knows the fleet, reports place their devices
	// (see Placement).
	Fleet *Fleet
	// MaxInflightBytes bounds the bytes of the report bodies read at
	// once, MaxReports the reports handled at once; beyond either, a
	// report is answered 503 with Retry-After. 0 is the default:
	// DefaultMaxInflightBytes, DefaultMaxReports.
	MaxInflightBytes int64
	MaxReports       int
}

// Server is the hub's HTTP side: ingest, JSON, the page and metrics.
type Server struct {
	store   *Store
	opts    Options
	log     *slog.Logger
	metrics *metrics
	mux     *http.ServeMux
	webhook *webhook // nil without Options.Webhook

	admit      admission
	bounds     *boundMetrics
	reportLog  *logLimit // report refused
	readLog    *logLimit // read refused
	failLog    *logLimit // read failed
	stopFlush  chan struct{}
	flushDone  chan struct{}
	flushOnce  sync.Once
	reportGate func(device string) // tests: holds a report once admitted
}

// NewServer returns the hub's handler over store.
func NewServer(store *Store, opts Options) (*Server, error) {
	if opts.ReadToken == "" && !opts.PublicRead {
		return nil, errors.New("reading the hub needs a token: give --read-token-file FILE, or --public-read to let anyone who reaches it read")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxInflightBytes <= 0 {
		opts.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if opts.MaxReports <= 0 {
		opts.MaxReports = DefaultMaxReports
	}
	s := &Server{store: store, opts: opts, log: opts.Log, metrics: newMetrics(store), mux: http.NewServeMux(), admit: newAdmission(opts)}
	s.bounds = newBoundMetrics(s.metrics.reg)
	s.reportLog = newLogLimit(s.log, msgReportRefused, opts.Now, s.bounds)
	s.readLog = newLogLimit(s.log, msgReadRefused, opts.Now, s.bounds)
	s.failLog = newLogLimit(s.log, msgReadFailed, opts.Now, s.bounds)
	if opts.Webhook != "" {
		u, err := url.Parse(opts.Webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--webhook %q is not an http(s) URL: use e.g. https://hooks.slack.com/services/…", redactURL(opts.Webhook))
		}
		s.webhook = newWebhook(opts.Webhook, store, opts.Log, opts.Now, s.bounds)
	}
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("POST /v1/reports", s.report)
	s.mux.HandleFunc("GET /v1/devices", s.read(s.apiDevices))
	s.mux.HandleFunc("GET /v1/devices/{name}", s.read(s.apiDevice))
	s.mux.HandleFunc("GET /v1/releases", s.read(s.apiReleases))
	s.mux.HandleFunc("GET /v1/verdict", s.readOrDevice(s.apiVerdict))
	s.mux.HandleFunc("GET /v1/releases/{release...}", s.read(s.apiRelease))
	s.mux.HandleFunc("GET /{$}", s.read(s.pageFleet))
	s.mux.HandleFunc("GET /devices/{name}", s.read(s.pageDevice))
	s.mux.HandleFunc("GET /releases/{release...}", s.read(s.pageRelease))
	s.startFlush()
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close posts the webhook events queued, logs the summaries of the log
// lines held back, and stops.
func (s *Server) Close() {
	s.stopFlushing()
	s.webhook.close()
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := s.store.db.PingContext(ctx); err != nil {
		http.Error(w, "database unreachable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// bearer is the token of an Authorization: Bearer header, or the password
// of a basic one.
func bearer(r *http.Request) string {
	if _, pw, ok := r.BasicAuth(); ok {
		return pw
	}
	h := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

// read guards a read endpoint with the read token.
func (s *Server) read(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.opts.PublicRead {
			got := bearer(r)
			if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.ReadToken)) != 1 {
				s.bounds.readsRefused.WithLabelValues(readUnauthorized).Inc()
				s.readLog.Log(r.Context(), slog.LevelWarn, remoteHost(r), keyRemote, r.RemoteAddr, "path", r.URL.Path, "token", tokenGiven(got))
				w.Header().Set("WWW-Authenticate", `Basic realm="tend hub", charset="UTF-8"`)
				http.Error(w, "reading the hub needs its read token: send Authorization: Bearer TOKEN (or any user name and the token as password)", http.StatusUnauthorized)
				return
			}
		}
		h(w, r)
	}
}

// report takes one status document: POST /v1/reports.
func (s *Server) report(w http.ResponseWriter, r *http.Request) {
	result, code, err := s.admitted(w, r)
	s.metrics.reports.WithLabelValues(result).Inc()
	if err != nil {
		level := slog.LevelWarn
		if code >= 500 && result != ResultBusy {
			level = slog.LevelError
		}
		s.reportLog.Log(r.Context(), level, remoteHost(r)+" "+result, keyResult, result, keyRemote, r.RemoteAddr, keyError, err.Error())
		if result == ResultBusy {
			busy(w, err.Error())
			return
		}
		http.Error(w, err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"result": result}) //nolint:errcheck // the client went away
}

func (s *Server) ingest(w http.ResponseWriter, r *http.Request) (string, int, error) {
	token := bearer(r)
	if token == "" {
		return ResultUnauthorized, http.StatusUnauthorized, errors.New("no device token: set report.tokenFile to a file holding the token tend-hub token create printed")
	}
	device, err := s.store.TokenDevice(r.Context(), token)
	if err != nil {
		return ResultError, http.StatusServiceUnavailable, err
	}
	if device == "" {
		return ResultUnauthorized, http.StatusUnauthorized, errors.New("unknown device token: create one with tend-hub token create DEVICE and put it in report.tokenFile")
	}
	if r.ContentLength > MaxReportBytes {
		return ResultTooLarge, http.StatusRequestEntityTooLarge, fmt.Errorf("report of %s exceeds %d bytes", device, MaxReportBytes)
	}
	budget := reportBudget(r.ContentLength)
	if !s.admit.bytes.TryAcquire(budget) {
		return ResultBusy, http.StatusServiceUnavailable, errBusyBytes
	}
	defer s.admit.bytes.Release(budget)
	if s.reportGate != nil {
		s.reportGate(device)
	}
	body, err := readBody(w, r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return ResultTooLarge, http.StatusRequestEntityTooLarge, fmt.Errorf("report of %s exceeds %d bytes", device, MaxReportBytes)
		}
		return ResultMalformed, http.StatusBadRequest, fmt.Errorf("read the report of %s: %w", device, err)
	}
	st, result, err := decodeReport(body, device)
	if err != nil {
		code := http.StatusBadRequest
		if result == ResultForbidden {
			code = http.StatusForbidden
		}
		return result, code, err
	}
	place, _ := reported(st) // checked by decodeReport
	inconsistent := false
	if f := s.opts.Fleet; f != nil {
		if p, ok := f.Place(device, nil); ok {
			inconsistent = !p.agrees(st)
			place = p
		}
	}
	res, err := s.store.IngestAt(r.Context(), st, place, s.opts.Now())
	if err == nil && inconsistent && res.result == ResultAccepted {
		res.result = ResultInconsistent
		s.log.Debug("report's wave or rollout disagrees with the fleet repo; the hub's taken", keyDevice, device,
			"reported", fmt.Sprintf("%s wave %s", cmp.Or(st.Rollout, "(none)"), waveText(st.Wave)),
			"fleet", fmt.Sprintf("%s wave %d", cmp.Or(place.Rollout, "(none)"), place.Wave), "revision", s.opts.Fleet.Revision())
	}
	if err != nil {
		code := http.StatusBadRequest
		if res.result == ResultError {
			code = http.StatusServiceUnavailable // the agent tries again
		}
		return res.result, code, fmt.Errorf("report of %s: %w", device, err)
	}
	s.webhook.crashLoop(r.Context(), device, st.AppliedRevision, res.applied, res.crashLoops)
	for _, d := range res.converged {
		s.metrics.convergence.Observe(d.Seconds())
	}
	if res.result == ResultReplayed {
		s.log.Info("older report ignored", keyDevice, device)
	}
	return res.result, http.StatusOK, nil
}

// metrics are the hub's own: counters of this process, and gauges read
// from the database at each scrape, so every replica serves the fleet's.
type metrics struct {
	reg         *prometheus.Registry
	reports     *prometheus.CounterVec
	convergence prometheus.Histogram
}

func newMetrics(store *Store) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tend_hub_reports_total",
			Help: "Status reports posted to this hub, by result: accepted, inconsistent (taken, its wave or rollout disagreeing with the fleet repo's), replayed (not after the last taken by its reportSeq, ignored), unauthorized, forbidden, too_large, malformed, error, busy (turned away 503: too many reports, or bytes of them, in flight).",
		}, []string{"result"}),
		convergence: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tend_hub_release_convergence_seconds",
			Help:    "From the moment the fleet first reported a release to each device's report that it applied it.",
			Buckets: prometheus.ExponentialBucketsRange(1, 14*24*3600, 20),
		}),
	}
	for _, r := range results {
		m.reports.WithLabelValues(r)
	}
	m.reports.WithLabelValues(ResultBusy)
	m.reg.MustRegister(m.reports, m.convergence, &fleetCollector{store: store})
	return m
}

var (
	devicesDesc        = prometheus.NewDesc("tend_hub_devices", "Devices the hub knows, by state.", []string{"state"}, nil)
	releaseDevicesDesc = prometheus.NewDesc("tend_hub_release_devices", "Devices by their part in each of the newest releases, by release key: applied, failed, held, staging, error, pending, superseded.", []string{"release", "state"}, nil)
)

// metricReleases bounds the releases tend_hub_release_devices lists, newest.
const metricReleases = 20

// fleetCollector reads the fleet's gauges from the database.
type fleetCollector struct{ store *Store }

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- devicesDesc
	ch <- releaseDevicesDesc
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	counts, err := c.store.stateCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(devicesDesc, err)
		return
	}
	for _, st := range api.States {
		ch <- prometheus.MustNewConstMetric(devicesDesc, prometheus.GaugeValue, float64(counts[st]), st)
	}
	rels, err := c.store.Releases(ctx, metricReleases)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(releaseDevicesDesc, err)
		return
	}
	for _, rel := range rels {
		for st, n := range rel.Counts {
			ch <- prometheus.MustNewConstMetric(releaseDevicesDesc, prometheus.GaugeValue, float64(n), rel.Key, st)
		}
	}
}

// waveText is a reported wave for a log line: "-" when not reported.
func waveText(w *int) string {
	if w == nil {
		return "-"
	}
	return strconv.Itoa(*w)
}
