package ocisource

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"

	ggcrtransport "github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/tend-dev/tend/oci/transport"
	"github.com/tend-dev/tend/source"
)

// Unreachable reports whether err is trouble reaching the registry that
// may pass (no answer, a stall, a server or proxy briefly failing), not an
// answer: a missing tag, refused credentials or a refused artifact are not.
func Unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, source.ErrRefused) ||
		errors.Is(err, transport.ErrNotFound) || errors.Is(err, transport.ErrUnauthorized) || errors.Is(err, ErrNotFleet) {
		return false
	}
	var te *ggcrtransport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
			http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	var op *net.OpError
	var dns *net.DNSError
	return errors.As(err, &op) || errors.As(err, &dns) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, transport.ErrStalled) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.ETIMEDOUT)
}
