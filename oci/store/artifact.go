package store

import (
	"context"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tend-dev/tend/oci/modelkit"
	"github.com/tend-dev/tend/oci/transport"
)

// LoadArtifact reads the artifact with manifest (or index) digest d from
// the store alone, without the network. For an index it picks the
// manifest for platform. It returns an error wrapping ErrNotStored when
// the manifest, or the index's chosen manifest, is not in the store. A
// base ModelKit is not resolved (its ref may be a tag, which needs the
// registry): Bases is empty, and only FetchArtifact and modelkit.Inspect
// give a base's entries.
func (s *Store) LoadArtifact(d v1.Hash, platform v1.Platform) (*modelkit.Artifact, error) {
	a, err := modelkit.Load(s.read, d, platform)
	if err != nil {
		return nil, err
	}
	// A ModelKit's config, when stored, says what its tar layers hold.
	if a.IsModelKit() && s.Has(a.Config) {
		config, err := s.read(a.Config, "ModelKit config")
		if err != nil {
			return nil, err
		}
		if err := a.SetHolds(config); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// FetchArtifact brings the manifest of repo@d into the store when it is
// not already there (for an index, the index and the manifest for
// platform), then the config blob, each checked against its digest, and
// returns the artifact and the bytes downloaded. Layers are not
// downloaded: FetchAll the artifact's Blobs for that. A ModelKit whose
// model is a base ModelKit gets the base's model layers (see
// modelkit.Artifact.ResolveBases): each base ref is resolved to a digest
// (one HEAD, none for a digest ref whose manifest is stored) and its
// manifest and config are stored likewise; a base that cannot be read is
// an error wrapping modelkit.ErrBaseModelKit.
func (s *Store) FetchArtifact(ctx context.Context, repo name.Repository, d v1.Hash, platform v1.Platform, opts transport.Options) (*modelkit.Artifact, int64, error) {
	a, total, err := s.fetchArtifact(ctx, repo, d, platform, opts)
	if err != nil {
		return nil, total, err
	}
	err = a.ResolveBases(func(ref string) (*modelkit.Artifact, string, error) {
		r, err := name.ParseReference(ref, opts.NameOptions(ref)...)
		if err != nil {
			return nil, "", err
		}
		h, err := s.pin(ctx, r, opts)
		if err != nil {
			return nil, "", err
		}
		b, n, err := s.fetchArtifact(ctx, r.Context(), h, platform, opts)
		total += n
		return b, r.Context().String(), err
	})
	if err != nil {
		return nil, total, err
	}
	return a, total, nil
}

// pin resolves r to the digest of its manifest: a digest ref whose
// manifest is stored needs no registry.
func (s *Store) pin(ctx context.Context, r name.Reference, opts transport.Options) (v1.Hash, error) {
	if dr, ok := r.(name.Digest); ok {
		if h, err := v1.NewHash(dr.DigestStr()); err == nil && s.Has(h) {
			return h, nil
		}
	}
	desc, err := transport.HeadManifest(ctx, r, opts)
	if err != nil {
		return v1.Hash{}, transport.ExplainHead(ctx, r, err, opts)
	}
	return desc.Digest, nil
}

// fetchArtifact is FetchArtifact without the bases.
func (s *Store) fetchArtifact(ctx context.Context, repo name.Repository, d v1.Hash, platform v1.Platform, opts transport.Options) (*modelkit.Artifact, int64, error) {
	total, err := s.fetchManifest(ctx, repo, d, opts)
	if err != nil {
		return nil, total, err
	}
	m, err := modelkit.ManifestFor(s.read, d, platform)
	if err != nil {
		return nil, total, err
	}
	n, err := s.fetchManifest(ctx, repo, m, opts)
	total += n
	if err != nil {
		return nil, total, err
	}
	a, err := s.LoadArtifact(d, platform)
	if err != nil {
		return nil, total, err
	}
	for _, h := range a.Manifests {
		n, err := s.Fetch(ctx, repo, h, a.Descriptor(h).Size, opts)
		total += n
		if err != nil {
			return nil, total, err
		}
	}
	if err := a.ReadModelKit(s.read); err != nil {
		return nil, total, err
	}
	return a, total, nil
}

// fetchManifest stores manifest d of repo unless it is there already.
func (s *Store) fetchManifest(ctx context.Context, repo name.Repository, d v1.Hash, opts transport.Options) (int64, error) {
	if s.HasBlob(d) {
		return 0, nil
	}
	ref := repo.Digest(d.String())
	desc, err := transport.GetManifest(ctx, ref, opts)
	if err != nil {
		return 0, transport.Classify(ref.String(), err, opts)
	}
	if err := s.Put(d, desc.Manifest); err != nil {
		return int64(len(desc.Manifest)), fmt.Errorf("manifest %s: %w", ref, err)
	}
	return int64(len(desc.Manifest)), nil
}
