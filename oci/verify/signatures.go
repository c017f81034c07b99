package verify

import (
	"context"
	"net/http"
)

// Signatures looks up the signatures of one digest for the checkers of a
// verification: through the Verifier's transport to the digest's
// repository, each read bounded and each request counted. Its Sigstore
// bundles are fetched once, however many cosign requirements read them.
type Signatures struct {
	c      *client
	digest string
	found  *Bundles
}

// Bundles are the Sigstore signature bundles attached to a digest, as far
// as the bounds let tend read them.
type Bundles struct {
	Raw [][]byte
	// Attestations counts the bundles passed over as attestations.
	Attestations int
	// Unread counts the bundle referrers not read: past MaxReferrers
	// manifests or MaxSignatures signatures.
	Unread int
}

// Bundles returns the Sigstore signature bundles attached to the digest
// (see fetchBundles), fetched at the first call.
func (s *Signatures) Bundles(ctx context.Context) (Bundles, error) {
	if s.found != nil {
		return *s.found, nil
	}
	b, err := fetchBundles(ctx, s.c, s.digest)
	if err != nil {
		return Bundles{}, err
	}
	s.found = &b
	return b, nil
}

// Manifest GETs the manifest of the repository that ref (a digest or a
// tag) names; with a digest, its content must hash to it. A 404 is
// ErrNotFound.
func (s *Signatures) Manifest(ctx context.Context, ref string) (*Manifest, error) {
	return s.c.manifest(ctx, ref)
}

// Blob GETs the blob of d, at most MaxBlobBytes, which must hash to
// d.Digest.
func (s *Signatures) Blob(ctx context.Context, d Descriptor) ([]byte, error) {
	return s.c.blob(ctx, d)
}

// Transport sends requests to the registry as the Verifier's own do,
// counted among them: for a checker with a client of its own (Notation's).
func (s *Signatures) Transport() http.RoundTripper {
	return counting{rt: s.c.rt, n: &s.c.requests}
}

// counting counts the requests sent through rt.
type counting struct {
	rt http.RoundTripper
	n  *int
}

func (c counting) RoundTrip(req *http.Request) (*http.Response, error) {
	*c.n++
	return c.rt.RoundTrip(req)
}

// fetchBundles returns the Sigstore signature bundles attached to digest:
// it reads the manifests of at most MaxReferrers bundle referrers, passes
// over attestations, and reads at most MaxSignatures bundles.
func fetchBundles(ctx context.Context, c *client, digest string) (Bundles, error) {
	refs, err := c.referrers(ctx, digest)
	if err != nil {
		return Bundles{}, err
	}
	// A referrer that cannot be read (gone, too large, another digest) is
	// skipped: whoever can push referrers must not hold a signed release
	// by attaching junk. Only when none could be read is its error said.
	var out Bundles
	var last error
	for i, d := range refs {
		if i == MaxReferrers || len(out.Raw) == MaxSignatures {
			out.Unread = len(refs) - i
			break
		}
		if !validDigest(d.Digest) {
			continue
		}
		m, err := c.manifest(ctx, d.Digest)
		if err != nil {
			if ctx.Err() != nil {
				return Bundles{}, err
			}
			last = err
			continue
		}
		if attestation(m.Annotations) {
			out.Attestations++
			continue
		}
		for _, l := range m.Layers {
			if l.MediaType == BundleArtifactType {
				b, err := c.blob(ctx, l)
				if err != nil {
					if ctx.Err() != nil {
						return Bundles{}, err
					}
					last = err
					break
				}
				out.Raw = append(out.Raw, b)
				break
			}
		}
	}
	if len(out.Raw) == 0 && out.Unread == 0 && last != nil {
		return Bundles{}, last
	}
	return out, nil
}
