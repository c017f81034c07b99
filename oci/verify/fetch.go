package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Bounds of what a registry sends while tend looks for signatures: an
// index of referrers, a signature's manifest and a bundle or payload are
// small. Of the referrers of one digest, only Sigstore bundles are
// counted (by artifactType; attestations are passed over where the index
// says so): the manifests of at most MaxReferrers of them are read, and
// at most MaxSignatures signature bundles among them; the rest are not
// read, and a digest whose signature is among them fails saying so.
const (
	MaxIndexBytes    = 1 << 20
	MaxIndexEntries  = 4096
	MaxManifestBytes = 256 << 10
	MaxBlobBytes     = 1 << 20
	MaxReferrers     = 64
	MaxSignatures    = 16
)

// Media and artifact types of cosign's signatures.
const (
	BundleArtifactType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// SignPredicateType is the in-toto predicate type of the statement a
	// cosign v3 signature signs; an attestation (cosign attest) has
	// another, which cosign also puts in the annotation below of its
	// manifest, and which the referrers API copies into the index.
	SignPredicateType       = "https://sigstore.dev/cosign/sign/v1"
	annotationPredicateType = "dev.sigstore.bundle.predicateType"
	mediaIndex              = "application/vnd.oci.image.index.v1+json"
	mediaManifest           = "application/vnd.oci.image.manifest.v1+json"
	mediaDockerV2           = "application/vnd.docker.distribution.manifest.v2+json"
	// MediaSimpleSigning is the layer of a signature in cosign's legacy
	// format (the manifest tagged sha256-HEX.sig).
	MediaSimpleSigning = "application/vnd.dev.cosign.simplesigning.v1+json"
)

// ErrNotFound is a 404 from the registry; errUnsupported, a 400, 405 or
// 501: what some registries answer for an API they do not have.
var (
	ErrNotFound    = errors.New("not found")
	errUnsupported = errors.New("not supported by the registry")
)

// client sends the requests of one verification, counting them.
type client struct {
	rt       http.RoundTripper
	repo     name.Repository
	requests int
}

// Descriptor is an OCI descriptor, as much as tend reads of it.
type Descriptor struct {
	MediaType    string            `json:"mediaType"`
	ArtifactType string            `json:"artifactType,omitempty"`
	Digest       string            `json:"digest"`
	Size         int64             `json:"size"`
	Annotations  map[string]string `json:"annotations,omitempty"`
}

// Manifest is an image manifest or an index, as much as tend reads of
// one while it looks for signatures.
type Manifest struct {
	MediaType    string       `json:"mediaType"`
	ArtifactType string       `json:"artifactType,omitempty"`
	Config       Descriptor   `json:"config"`
	Layers       []Descriptor `json:"layers"`
	Manifests    []Descriptor `json:"manifests"`
	// Annotations say, of a Sigstore bundle's manifest, the predicate
	// type of what it signs.
	Annotations map[string]string `json:"annotations,omitempty"`
}

func (c *client) url(kind, ref string) string {
	scheme := c.repo.Scheme()
	return fmt.Sprintf("%s://%s/v2/%s/%s/%s", scheme, c.repo.RegistryStr(), c.repo.RepositoryStr(), kind, ref)
}

// get GETs url with accept and reads the body within max bytes; a 404 is
// ErrNotFound.
func (c *client) get(ctx context.Context, url, accept string, max int64) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	c.requests++
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return nil, "", fmt.Errorf("GET %s: %w", req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, "", ErrNotFound
	case resp.StatusCode == http.StatusBadRequest, resp.StatusCode == http.StatusMethodNotAllowed, resp.StatusCode == http.StatusNotImplemented:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, "", fmt.Errorf("GET %s: HTTP %d: %w", req.URL.Redacted(), resp.StatusCode, errUnsupported)
	case resp.StatusCode != http.StatusOK:
		return nil, "", fmt.Errorf("GET %s: HTTP %d", req.URL.Redacted(), resp.StatusCode)
	case resp.ContentLength > max:
		return nil, "", fmt.Errorf("GET %s: %d bytes, over tend's bound of %d for a signature lookup", req.URL.Redacted(), resp.ContentLength, max)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, "", fmt.Errorf("GET %s: %w", req.URL.Redacted(), err)
	}
	if int64(len(b)) > max {
		return nil, "", fmt.Errorf("GET %s: over tend's bound of %d bytes for a signature lookup", req.URL.Redacted(), max)
	}
	return b, resp.Header.Get("Content-Type"), nil
}

// manifest GETs the manifest ref (a digest or a tag) names; with a
// digest, its content must hash to it.
func (c *client) manifest(ctx context.Context, ref string) (*Manifest, error) {
	b, _, err := c.get(ctx, c.url("manifests", ref), strings.Join([]string{mediaManifest, mediaIndex, mediaDockerV2}, ", "), MaxManifestBytes)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(ref, "sha256:") {
		if err := checkDigest(b, ref); err != nil {
			return nil, fmt.Errorf("manifest %s@%s: %w", c.repo, ref, err)
		}
	}
	return parseManifest(b)
}

// blob GETs the blob of d, which must hash to d.Digest.
func (c *client) blob(ctx context.Context, d Descriptor) ([]byte, error) {
	if d.Size > MaxBlobBytes {
		return nil, fmt.Errorf("signature blob %s@%s is %d bytes, over tend's bound of %d", c.repo, d.Digest, d.Size, MaxBlobBytes)
	}
	if !validDigest(d.Digest) {
		return nil, fmt.Errorf("signature blob digest %q is not sha256:HEX", d.Digest)
	}
	b, _, err := c.get(ctx, c.url("blobs", d.Digest), "", MaxBlobBytes)
	if err != nil {
		return nil, err
	}
	if err := checkDigest(b, d.Digest); err != nil {
		return nil, fmt.Errorf("blob %s@%s: %w", c.repo, d.Digest, err)
	}
	return b, nil
}

// referrers lists the bundles attached to digest: through the referrers
// API, or, where the registry has none (a 404, 400, 405 or 501, or an
// answer that is no index), through the referrers tag schema (the index
// tagged sha256-HEX). None is an empty list.
func (c *client) referrers(ctx context.Context, digest string) ([]Descriptor, error) {
	b, ctype, err := c.get(ctx, c.url("referrers", digest)+"?artifactType="+strings.ReplaceAll(BundleArtifactType, "+", "%2B"), mediaIndex, MaxIndexBytes)
	noAPI := errors.Is(err, ErrNotFound) || errors.Is(err, errUnsupported)
	if noAPI || (err == nil && !strings.HasPrefix(ctype, mediaIndex) && !strings.HasPrefix(ctype, "application/json")) {
		b, _, err = c.get(ctx, c.url("manifests", TagOf(digest)), mediaIndex, MaxIndexBytes)
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return bundlesOf(b)
}

// bundlesOf returns the descriptors of a referrers index that may be
// cosign signatures: Sigstore bundles (by artifactType, whether or not
// the registry filtered by it), but for the attestations the index says
// are (their predicate type annotation, which the referrers API copies
// from the manifest and the referrers tag schema does not).
func bundlesOf(index []byte) ([]Descriptor, error) {
	m, err := parseManifest(index)
	if err != nil {
		return nil, fmt.Errorf("referrers index: %w", err)
	}
	var out []Descriptor
	for _, d := range m.Manifests {
		if d.ArtifactType == BundleArtifactType && !attestation(d.Annotations) {
			out = append(out, d)
		}
	}
	return out, nil
}

// attestation reports whether the annotations of a bundle's manifest say
// it holds an attestation (cosign attest), not a signature.
func attestation(annotations map[string]string) bool {
	p, ok := annotations[annotationPredicateType]
	return ok && p != SignPredicateType
}

// parseManifest decodes a manifest or index, bounded in entries.
func parseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("not an OCI manifest: %w", err)
	}
	if len(m.Manifests) > MaxIndexEntries || len(m.Layers) > MaxIndexEntries {
		return nil, fmt.Errorf("an OCI manifest of %d entries and %d layers: over tend's bound of %d", len(m.Manifests), len(m.Layers), MaxIndexEntries)
	}
	return &m, nil
}

// TagOf is the tag cosign and the referrers tag schema name digest's
// signatures by: sha256-HEX.
func TagOf(digest string) string { return strings.Replace(digest, ":", "-", 1) }

func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

func checkDigest(b []byte, want string) error {
	sum := sha256.Sum256(b)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != want {
		return fmt.Errorf("content hashes to %s, not %s: the registry sent other bytes", got, want)
	}
	return nil
}
