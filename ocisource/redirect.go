package ocisource

import (
	"fmt"
	"net/http"

	"github.com/tend-dev/tend/oci/transport"
)

// MaxRedirects is how many redirects one registry request may follow, as
// Go's HTTP client allows by default and the model client does: the
// go-containerregistry client of a fleet artifact follows a registry's
// redirects to its own host without a limit, so a redirect loop would
// send requests as fast as the registry answers until the timeout.
const MaxRedirects = 10

// limitRedirects returns opts whose requests follow at most MaxRedirects
// redirects, failing with ErrRedirectLoop after.
func limitRedirects(opts transport.Options) transport.Options {
	base := opts.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if _, ok := base.(redirectLimit); !ok {
		opts.Transport = redirectLimit{base: base}
	}
	return opts
}

// redirectLimit counts the redirects that led to a request: the HTTP
// client sets Request.Response to the redirect that made it, whose
// Request is the one before.
type redirectLimit struct{ base http.RoundTripper }

func (t redirectLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	hops := 0
	for r := req; r.Response != nil && r.Response.Request != nil; r = r.Response.Request {
		hops++
	}
	if hops > MaxRedirects {
		first := req
		for first.Response != nil && first.Response.Request != nil {
			first = first.Response.Request
		}
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("%w: registry %s redirected %s %s more than %d times (a redirect loop?), last to %s; fix the registry or the proxy in front of it",
			ErrRedirectLoop, first.URL.Host, first.Method, first.URL.Redacted(), MaxRedirects, req.URL.Redacted())
	}
	return t.base.RoundTrip(req)
}
