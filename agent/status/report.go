package status

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/internal/statedir"
	"github.com/tend-dev/tend/manifest"
)

// Report transport settings.
const (
	reportRetryMax     = 4
	reportRetryWaitMin = time.Second
	reportRetryWaitMax = 30 * time.Second
	reportAttemptLimit = 30 * time.Second // one HTTP attempt
	reportMaxJitter    = 30 * time.Second
	reportFailureWait  = 10 * time.Second // after a failed post; doubles, capped at the interval
	reportBodySnippet  = 200              // bytes of a rejection's body that are logged
)

// Log keys of the reporter.
const (
	keyReportURL      = "collector"
	keyReportStatus   = "httpStatus"
	keyReportBody     = "body"
	keyReportFailures = "failures"
	keyReportSeq      = "reportSeq"
)

// Reporter posts the status document to a collector: when its content
// changes, and at least every interval even when it does not. Each post
// waits a random jitter first, so a fleet does not post at once after a
// fleet-wide commit or a power cut.
type Reporter struct {
	url       string        // without userinfo, which goes in an Authorization header
	user      *url.Userinfo // nil when the URL has none
	display   string        // for logs and errors: no credentials
	headers   map[string]string
	tokenFile string   // a bearer token's file, read at each post; "" for none
	secrets   []string // header values and userinfo, redacted from anything logged
	interval  time.Duration
	stateDir  string
	log       *slog.Logger
	client    *retryablehttp.Client

	// Seams for tests.
	now         func() time.Time
	jitter      func(max time.Duration) time.Duration
	failureWait time.Duration
	onWait      func(time.Duration) // Run settles into a wait with nothing to post now

	sent atomic.Int64

	// Start and Stop.
	cancel context.CancelFunc
	done   chan struct{}

	// Run's own state.
	last     reportCache // the last accepted report, and the last reportSeq taken
	failures int         // consecutive failed posts
	warned   string      // what the last warning was about; "" after a success

	// nextSeq's own state.
	onDisk    string // the epoch report.json holds; "" when none
	seqUnkept bool   // report.json could not be written since the last time it was
}

// reportCache is the content of statedir's report.json, the cache of the
// last report a collector accepted: its status fingerprint and when it was
// accepted, so a restart does not resend an unchanged status before the
// interval has passed; and the reportSeq of the last report posted, so
// that every report of the stateDir is numbered after the one before
// (see nextSeq).
type reportCache struct {
	Fingerprint string    `json:"fingerprint"`
	AcceptedAt  time.Time `json:"acceptedAt"`
	Epoch       string    `json:"epoch,omitempty"`
	Seq         uint64    `json:"seq,omitempty"`
}

// NewReporter returns a Reporter for cfg that keeps its cache in stateDir.
// A nil log logs nothing.
func NewReporter(cfg manifest.Report, stateDir string, log *slog.Logger) (*Reporter, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	interval := cfg.Interval.D()
	switch {
	case interval == 0:
		interval = manifest.DefaultReportInterval
	case interval < 0:
		return nil, fmt.Errorf("report.interval %s is negative: use e.g. 5m", interval)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold credentials
		}
		return nil, fmt.Errorf("report.url is not a valid URL (%v): use e.g. https://collector.example.com/v1/status", err)
	}
	r := &Reporter{
		user:        u.User,
		headers:     cfg.Headers,
		tokenFile:   cfg.TokenFile,
		interval:    interval,
		stateDir:    stateDir,
		now:         time.Now,
		jitter:      reportJitter,
		failureWait: reportFailureWait,
	}
	u.User = nil
	r.url = u.String()
	// The query may carry a key (?api_key=…): logs and errors show its
	// names only, and its values are redacted wherever they appear.
	shown := *u
	if q := u.Query(); len(q) > 0 {
		for k, vs := range q {
			for _, v := range vs {
				if v != "" {
					r.secrets = append(r.secrets, v, url.QueryEscape(v))
				}
			}
			q[k] = []string{"redacted"}
		}
		shown.RawQuery = q.Encode()
	}
	r.display = shown.String()
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("report.url %s is not an http(s) URL: use e.g. https://collector.example.com/v1/status", r.display)
	}
	if r.user != nil {
		pw, _ := r.user.Password()
		basic := base64.StdEncoding.EncodeToString([]byte(r.user.Username() + ":" + pw))
		r.secrets = append(r.secrets, r.user.String(), r.user.Username(), pw, basic)
	}
	for k, v := range cfg.Headers {
		if !validHeaderName(k) {
			return nil, fmt.Errorf("report.headers: %q is not a valid header name", k)
		}
		if !validHeaderValue(v) {
			return nil, fmt.Errorf("report.headers: the value of %s has characters a header cannot carry (a newline?)", k)
		}
		r.secrets = append(r.secrets, v)
		if f := strings.Fields(v); len(f) > 1 {
			r.secrets = append(r.secrets, f[len(f)-1]) // the token of "Bearer <token>"
		}
	}
	r.log = log.With(keyReportURL, r.display)

	c := retryablehttp.NewClient()
	c.HTTPClient.Timeout = reportAttemptLimit
	c.Logger = reportRetryLogger{r.log, r.redact}
	c.RetryMax, c.RetryWaitMin, c.RetryWaitMax = reportRetryMax, reportRetryWaitMin, reportRetryWaitMax
	c.CheckRetry = retryReport
	c.Backoff = r.backoff
	c.ErrorHandler = keepLastResponse
	r.client = c

	if r.last, err = readReportCache(stateDir); err != nil {
		if _, newer := errors.AsType[*statedir.NewerError](err); newer {
			return nil, err // a newer tend's cache is not written over
		}
		// Only costs one post that may not have been needed.
		r.log.Warn("ignoring the report cache; the status will be posted at once", keyError, err.Error())
	}
	r.onDisk = r.last.Epoch
	return r, nil
}

// Sent is how many posts the collector accepted.
func (r *Reporter) Sent() int { return int(r.sent.Load()) }

// Start runs the reporter in the background until Stop: once ready is
// closed (the first tick is in the status), see Run.
func (r *Reporter) Start(ctx context.Context, ready <-chan struct{}, status func() Status, changed <-chan struct{}) {
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		select {
		case <-ctx.Done():
			return
		case <-ready:
		}
		r.Run(ctx, status, changed)
	}()
}

// Stop ends the reporter and waits for it; a post in flight is cancelled.
func (r *Reporter) Stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
}

// Run posts status() when changed fires with a status whose fingerprint
// differs from the last accepted one, and at least every interval, until
// ctx is done. A failed post is tried again after a wait that doubles with
// each further failure, up to the interval.
func (r *Reporter) Run(ctx context.Context, status func() Status, changed <-chan struct{}) {
	var retryAt time.Time // after a failed post, none before this
	for {
		if wait := r.wait(status(), retryAt); wait > 0 {
			if r.onWait != nil {
				r.onWait(wait)
			}
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-changed:
				timer.Stop()
				continue
			case <-timer.C:
				continue
			}
		}
		if !reportSleep(ctx, r.jitter(min(r.interval/10, reportMaxJitter))) {
			return
		}
		s := status() // the latest, after the jitter
		if r.wait(s, retryAt) > 0 {
			continue // back to what was last accepted
		}
		err := r.post(ctx, s)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.failures++
			retryAt = r.now().Add(backoff.Exponential{Initial: r.failureWait, Max: r.interval}.Delay(r.failures))
			r.failed(err)
			continue
		}
		if r.failures > 0 {
			r.log.Info("collector accepts status reports again", keyReportFailures, r.failures)
		}
		r.failures, r.warned, retryAt = 0, "", time.Time{}
	}
}

// wait is how long until s must be posted.
func (r *Reporter) wait(s Status, retryAt time.Time) time.Duration {
	now := r.now()
	if d := retryAt.Sub(now); d > 0 {
		return d
	}
	if s.Fingerprint() != r.last.Fingerprint {
		return 0
	}
	return r.last.AcceptedAt.Add(r.interval).Sub(now)
}

// post sends s once, with retries, and records it if it is accepted. It
// is numbered with the next reportSeq; its retries carry the same. It
// lists the newest MaxReportQuarantined quarantined releases, as much as
// a collector takes.
func (r *Reporter) post(ctx context.Context, s Status) error {
	seq := r.nextSeq()
	s.ReportSeq = &seq
	if n := len(s.Quarantined); n > MaxReportQuarantined {
		s.Quarantined = s.Quarantined[n-MaxReportQuarantined:] // oldest first
	}
	body, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, r.url, body)
	if err != nil {
		return fmt.Errorf("post status to %s: %w", r.display, err)
	}
	version := s.Version
	if version == "" {
		version = "dev"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tend/"+version)
	if r.user != nil {
		// As net/http would from the URL, unless headers set Authorization.
		pw, _ := r.user.Password()
		req.SetBasicAuth(r.user.Username(), pw)
	}
	if r.tokenFile != "" {
		token, err := r.token()
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("post status to %s: %w", r.display, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, reportBodySnippet))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the connection is reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &collectorError{Status: resp.StatusCode, Body: string(bytes.ToValidUTF8(snippet, nil))}
	}
	r.last.Fingerprint, r.last.AcceptedAt = s.Fingerprint(), r.now()
	r.sent.Add(1)
	r.log.Debug("status report accepted", keyReportStatus, resp.StatusCode, keyReportSeq, seq.Seq)
	if err := writeReportCache(r.stateDir, r.last); err != nil {
		r.log.Warn("cannot cache the accepted report; a restart will post the status again", keyError, err.Error())
	} else {
		r.onDisk = r.last.Epoch
	}
	return nil
}

// token reads the bearer token of report.tokenFile, and redacts it from
// anything logged from then on.
func (r *Reporter) token() (string, error) {
	b, err := os.ReadFile(r.tokenFile)
	if err != nil {
		return "", fmt.Errorf("report.tokenFile: %w; write the token tend-hub token create printed there", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" || !validHeaderValue(token) || strings.ContainsAny(token, " \t") {
		return "", fmt.Errorf("report.tokenFile %s holds no token (empty, or several words): write the token tend-hub token create printed there", r.tokenFile)
	}
	if !slices.Contains(r.secrets, token) {
		r.secrets = append(r.secrets, token)
	}
	return token, nil
}

// failed logs a failed post: at warn the first time it fails this way,
// at debug while it goes on failing the same way.
func (r *Reporter) failed(err error) {
	what, args := "error", []any{keyError, r.redact(err.Error()), keyReportFailures, r.failures}
	var ce *collectorError
	if errors.As(err, &ce) {
		what = fmt.Sprint(ce.Status)
		args = []any{keyReportStatus, ce.Status, keyReportBody, r.redact(ce.Body), keyReportFailures, r.failures}
	}
	msg := "status report failed; will try again"
	if ce != nil && ce.Status >= 400 && ce.Status < 500 && ce.Status != http.StatusRequestTimeout && ce.Status != http.StatusTooManyRequests {
		msg = "collector rejected the status report; check report.url and report.headers"
	}
	level := slog.LevelWarn
	if what == r.warned {
		level = slog.LevelDebug
	}
	r.warned = what
	r.log.Log(context.Background(), level, msg, args...)
}

// redact removes header values and URL credentials from s.
func (r *Reporter) redact(s string) string {
	for _, secret := range r.secrets {
		if len(secret) >= 4 { // shorter ones would garble the rest
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	return s
}

// backoff is the wait before retry attempt+1 of one post: exponential from
// minWait to maxWait (retryablehttp's bounds), or what a 429's or 503's
// Retry-After asks, never more than the interval: a collector asking for
// more gets the next scheduled post instead.
func (r *Reporter) backoff(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
	d := backoff.Exponential{Initial: minWait, Max: maxWait}.Delay(attempt + 1)
	if resp != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
		if after, ok := retryAfter(resp.Header.Get("Retry-After"), r.now()); ok {
			d = after
		}
	}
	return min(d, r.interval)
}
