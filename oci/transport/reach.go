package transport

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
)

// reachError says why registry (host[:port]) could not be reached, for
// people. For a registry in registries.insecure it keeps only the plain
// HTTP attempt: go-containerregistry tries https first and joins both
// failures, and the https one says nothing about a registry tend reaches
// over http. A refused connection and a host with no address say what to
// check, so a wrong port does not read as a registry that is down.
func reachError(registry string, err error, opts Options) error {
	if slices.Contains(opts.Insecure, registry) {
		if plain := attempt(err, "http"); plain != nil {
			err = plain
		}
	}
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w (nothing listens on %s: check the host and port in the ref)", err, registry)
	case errors.As(err, &dns) && dns.IsNotFound:
		return fmt.Errorf("%w (no such host: check the host in the ref)", err)
	}
	return err
}

// attempt returns the request to scheme among the attempts err joins
// (go-containerregistry's ping, a list of errors that has no Unwrap), or
// nil when err holds no such list.
func attempt(err error, scheme string) error {
	errorType := reflect.TypeFor[error]()
	for e := err; e != nil; e = errors.Unwrap(e) {
		v := reflect.ValueOf(e)
		if v.Kind() != reflect.Slice || v.Type().Elem() != errorType {
			continue
		}
		for i := range v.Len() {
			one, _ := v.Index(i).Interface().(error)
			var ue *url.Error
			if errors.As(one, &ue) && strings.HasPrefix(ue.URL, scheme+"://") {
				return one
			}
		}
	}
	return nil
}

// registryOf is the registry (host[:port]) of ref, a repository or a
// reference; "" when ref does not parse.
func registryOf(ref string) string {
	if r, err := name.ParseReference(ref); err == nil {
		return r.Context().RegistryStr()
	}
	if r, err := name.NewRepository(ref); err == nil {
		return r.RegistryStr()
	}
	return ""
}
