package store

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tend-dev/tend/oci/transport"
)

// ResolveInto pins ref (a tag or a digest) to a digest as
// transport.Resolve does without a policy, but with a GET of the manifest
// instead of a HEAD, and keeps the manifest in s: for a model with no
// version on the node yet, whose manifest is read next anyway, that is
// one request fewer.
func (s *Store) ResolveInto(ctx context.Context, ref string, opts transport.Options) (transport.Resolved, error) {
	res := transport.Resolved{Ref: ref}
	r, err := name.ParseReference(ref, opts.NameOptions(ref)...)
	if err != nil {
		return res, fmt.Errorf("model ref %q: %w", ref, err)
	}
	if t, ok := r.(name.Tag); ok {
		res.Tag = t.TagStr()
	}
	desc, err := transport.GetManifest(ctx, r, opts)
	if err != nil {
		return res, transport.ExplainHead(ctx, r, err, opts)
	}
	if err := s.Put(desc.Digest, desc.Manifest); err != nil {
		return res, fmt.Errorf("manifest %s: %w", r, err)
	}
	res.Digest, res.MediaType, res.Size = desc.Digest.String(), string(desc.MediaType), int64(len(desc.Manifest))
	return res, nil
}
