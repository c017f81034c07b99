package cosign

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"

	"github.com/tend-dev/tend/oci/verify"
)

// Annotations of cosign's legacy signature layers.
const (
	annotationSignature   = "dev.cosignproject.cosign/signature"
	annotationCertificate = "dev.sigstore.cosign/certificate"
)

// simpleSigning is the payload cosign's legacy format signs.
type simpleSigning struct {
	Critical struct {
		Image struct {
			DockerManifestDigest string `json:"docker-manifest-digest"`
		} `json:"image"`
		Type string `json:"type"`
	} `json:"critical"`
}

// legacy checks the signatures of cosign's legacy format, the manifest
// tagged sha256-HEX.sig: a layer per signature, its payload a simple
// signing document naming the digest, its signature an annotation. Only
// key-based ones are read; a keyless one is counted as such.
func (p *policy) legacy(ctx context.Context, sigs *verify.Signatures, digest string, t *tally) (bool, error) {
	m, err := sigs.Manifest(ctx, verify.TagOf(digest)+".sig")
	if errors.Is(err, verify.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	seen := 0
	for _, l := range m.Layers {
		if l.MediaType != verify.MediaSimpleSigning {
			continue
		}
		if seen++; seen > verify.MaxSignatures {
			break
		}
		if _, ok := l.Annotations[annotationCertificate]; ok {
			if len(p.identities) > 0 {
				t.otherID++
				t.lastErr = "a keyless signature in cosign's legacy format, which tend does not check: sign with cosign v3 (a Sigstore bundle)"
			} else {
				t.keyless++
			}
			continue
		}
		if len(p.keys) == 0 {
			t.keyed++
			continue
		}
		if p.block.TLogIsRequired() {
			t.noTlog++
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(l.Annotations[annotationSignature])
		if err != nil || len(sig) == 0 {
			t.invalid++
			continue
		}
		payload, err := sigs.Blob(ctx, l)
		if err != nil {
			return false, err
		}
		if p.checkLegacy(payload, sig, digest, t) {
			return true, nil
		}
	}
	return false, nil
}

// checkLegacy verifies one legacy signature sig of payload against p's
// keys for digest.
func (p *policy) checkLegacy(payload, sig []byte, digest string, t *tally) bool {
	for _, k := range p.keys {
		if k.verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(payload)) != nil {
			continue
		}
		var ss simpleSigning
		if err := json.Unmarshal(payload, &ss); err != nil {
			t.invalid++
			return false
		}
		if ss.Critical.Image.DockerManifestDigest != digest {
			t.otherDigest++
			return false
		}
		return true
	}
	t.otherKey++
	return false
}
