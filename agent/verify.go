package agent

import (
	"sync"
	"sync/atomic"

	"github.com/tend-dev/tend/config"
	"github.com/tend-dev/tend/oci/verify"
)

// verifierOnce is a Reconciler's signature verifier, made at first use
// and kept, so that what it verified is remembered from tick to tick.
type verifierOnce struct {
	once sync.Once
	v    *verify.Verifier
	// observe hears each verification (tend_verify_total); see
	// Reconciler.OnVerify.
	observe atomic.Pointer[func(kind, result string)]
}

// verifier returns the Reconciler's verifier of signatures.
func (r *Reconciler) verifier() *verify.Verifier {
	r.verify.once.Do(func() {
		v := config.NewVerifier(r.Config)
		v.Now = r.now
		v.Observe = func(kind, result string) {
			if f := r.verify.observe.Load(); f != nil {
				(*f)(kind, result)
			}
		}
		r.verify.v = v
	})
	return r.verify.v
}

// OnVerify has f hear each signature verification that asked a registry:
// the kind of artifact (source, model, image) and its result (ok,
// failed).
func (r *Reconciler) OnVerify(f func(kind, result string)) { r.verify.observe.Store(&f) }
