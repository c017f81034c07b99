package verify

import (
	"context"
	"net/http"
	"sync"

	"github.com/tend-dev/tend/internal/feature"
	"github.com/tend-dev/tend/manifest"
)

// CosignPolicy is one cosign block with its files read (its keys, its
// trusted root), as a cosign checker reads them.
type CosignPolicy interface {
	// Check is nil when one of t's signatures, which sigs looks up,
	// satisfies the policy; an *Error (wrapping ErrUnsigned) that says
	// what was found when none does; any other error when they could not
	// be looked up.
	Check(ctx context.Context, sigs *Signatures, t Target) error
}

// CosignLoader reads the files of a cosign block into its policy; an
// error names the file and what is wrong with it.
type CosignLoader func(*manifest.CosignVerify) (CosignPolicy, error)

// NotationChecker checks that t carries a Notation signature that the
// trust policy and trust store of n allow, sending its requests through
// rt: nil, an *Error, or an error reading n's files or the registry.
type NotationChecker func(ctx context.Context, rt http.RoundTripper, t Target, n *manifest.NotationVerify) error

var (
	checkersMu sync.Mutex
	cosign     CosignLoader
	notation   NotationChecker
)

// RegisterCosign makes l the cosign checker. Package oci/verify/cosign
// registers itself when imported (cmd/tend imports it unless built with
// tend_omit_cosign, which leaves sigstore out). It panics when called
// twice.
func RegisterCosign(l CosignLoader) {
	checkersMu.Lock()
	defer checkersMu.Unlock()
	if cosign != nil {
		panic("verify: cosign registered twice")
	}
	cosign = l
}

// RegisterNotation makes c the Notation checker. Package
// oci/verify/notation registers itself when imported (cmd/tend imports it
// unless built with tend_omit_notation, which leaves notation-go out). It
// panics when called twice.
func RegisterNotation(c NotationChecker) {
	checkersMu.Lock()
	defer checkersMu.Unlock()
	if notation != nil {
		panic("verify: notation registered twice")
	}
	notation = c
}

// cosignLoader is the registered cosign checker, or the error of a tend
// built without one.
func cosignLoader() (CosignLoader, error) {
	checkersMu.Lock()
	defer checkersMu.Unlock()
	if cosign == nil {
		return nil, feature.Cosign.Unregistered()
	}
	return cosign, nil
}

// notationChecker is the registered Notation checker, or the error of a
// tend built without one.
func notationChecker() (NotationChecker, error) {
	checkersMu.Lock()
	defer checkersMu.Unlock()
	if notation == nil {
		return nil, feature.Notation.Unregistered()
	}
	return notation, nil
}
