package render

import (
	"context"
	"strings"

	"github.com/tend-dev/tend/manifest"
)

// ImageResolver pins the image of a container service to a digest. A
// Resolver that implements it resolves images too; the images of one
// that does not are planned by their declaration, as Declared plans them.
type ImageResolver interface {
	ResolveImage(ctx context.Context, service, ref string) (Resolution, error)
}

// ServiceImageResolver is an ImageResolver that is handed the whole
// service, for what besides its ref bears on the image (its own verify
// block); render prefers it.
type ServiceImageResolver interface {
	ResolveServiceImage(ctx context.Context, s manifest.Service) (Resolution, error)
}

// ResolveImage returns ref as declared: its digest for a digest ref.
func (Declared) ResolveImage(_ context.Context, _ string, ref string) (Resolution, error) {
	if _, digest, ok := strings.Cut(ref, "@"); ok {
		return Resolution{Digest: digest}, nil
	}
	return Resolution{Digest: ref}, nil
}

// ResolveImage pins ref in its registry (one HEAD for a tag), as a model
// with no policy.
func (r *Registry) ResolveImage(ctx context.Context, service, ref string) (Resolution, error) {
	return r.Resolve(ctx, manifest.Model{Name: service, Ref: ref})
}

// resolveImage pins the image of s through resolver, or by declaration
// when resolver does not resolve images.
func resolveImage(ctx context.Context, s manifest.Service, resolver Resolver) (Resolution, error) {
	if !s.Container() {
		return Resolution{}, nil
	}
	if sr, ok := resolver.(ServiceImageResolver); ok {
		return sr.ResolveServiceImage(ctx, s)
	}
	if ir, ok := resolver.(ImageResolver); ok {
		return ir.ResolveImage(ctx, s.Name, s.Image)
	}
	return Declared{}.ResolveImage(ctx, s.Name, s.Image)
}
