package status

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/tend-dev/tend/internal/backoff"
	"github.com/tend-dev/tend/internal/statedir"
)

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// collectorError is a post the collector answered with a status other than
// 2xx, after any retries.
type collectorError struct {
	Status int
	Body   string // its first bytes
}

func (e *collectorError) Error() string {
	return fmt.Sprintf("collector answered %d %s", e.Status, http.StatusText(e.Status))
}

// retryReport is retryablehttp's default policy (connection errors, 429,
// 5xx but 501), and 408 too.
func retryReport(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() == nil && err == nil && resp.StatusCode == http.StatusRequestTimeout {
		return true, nil
	}
	return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
}

// keepLastResponse returns the last response when retries are exhausted, so
// that its status and body can be logged, and the error otherwise.
func keepLastResponse(resp *http.Response, err error, attempts int) (*http.Response, error) {
	if resp != nil {
		return resp, nil
	}
	return nil, fmt.Errorf("giving up after %d attempt(s): %w", attempts, err)
}

func readReportCache(stateDir string) (reportCache, error) {
	var c reportCache
	if _, err := statedir.ReadJSON(statedir.Dir(stateDir).Report(), &c); err != nil {
		return reportCache{}, err
	}
	return c, nil
}

// writeReportCache publishes c atomically: temp file, fsync, rename.
func writeReportCache(stateDir string, c reportCache) error {
	return statedir.WriteJSON(stateDir, statedir.ReportFile, c, 0o644)
}

// validHeaderName reports whether k is an RFC 9110 token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range []byte(k) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v has no control characters but tab.
func validHeaderValue(v string) bool {
	for _, c := range []byte(v) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func reportJitter(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return rand.N(max)
}

// reportSleep waits d, reporting false if ctx ends first.
func reportSleep(ctx context.Context, d time.Duration) bool {
	return backoff.Sleep(ctx, d) == nil
}

// reportRetryLogger hands retryablehttp's logs to slog at debug, redacted: the
// reporter logs what matters itself.
type reportRetryLogger struct {
	log    *slog.Logger
	redact func(string) string
}

var _ retryablehttp.LeveledLogger = reportRetryLogger{}

func (l reportRetryLogger) Error(msg string, kv ...any) { l.log.Debug(msg, l.args(kv)...) }
func (l reportRetryLogger) Warn(msg string, kv ...any)  { l.log.Debug(msg, l.args(kv)...) }
func (l reportRetryLogger) Info(msg string, kv ...any)  { l.log.Debug(msg, l.args(kv)...) }
func (l reportRetryLogger) Debug(msg string, kv ...any) { l.log.Debug(msg, l.args(kv)...) }

func (l reportRetryLogger) args(kv []any) []any {
	out := make([]any, len(kv))
	for i, v := range kv {
		switch v := v.(type) {
		case error:
			out[i] = l.redact(v.Error())
		case string:
			out[i] = l.redact(v)
		default:
			out[i] = v
		}
	}
	return out
}
