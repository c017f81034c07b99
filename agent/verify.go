package agent

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tend-dev/tend/manifest"
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
		r.verify.v = &verify.Verifier{Options: RegistryOptions(r.Config), Now: r.now, Observe: func(kind, result string) {
			if f := r.verify.observe.Load(); f != nil {
				(*f)(kind, result)
			}
		}}
	})
	return r.verify.v
}

// OnVerify has f hear each signature verification that asked a registry:
// the kind of artifact (source, model, image) and its result (ok,
// failed).
func (r *Reconciler) OnVerify(f func(kind, result string)) { r.verify.observe.Store(&f) }

// sourceVerify is the check of the fleet artifact's signatures that
// source.verify asks for, or nil.
func sourceVerify(c *manifest.AgentConfig, ver *verify.Verifier) func(context.Context, name.Repository, string) error {
	req := c.Source.Verify.Artifact()
	if req == nil {
		return nil
	}
	return func(ctx context.Context, repo name.Repository, digest string) error {
		return ver.Verify(ctx, verify.Target{Kind: verify.KindSource, Repository: repo, Digest: digest}, []*manifest.ArtifactVerify{req})
	}
}
