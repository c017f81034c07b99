package cosign

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/tend-dev/tend/oci/verify"
)

// tally counts the signatures that did not satisfy a requirement, by why,
// for the error that says what was found.
type tally struct {
	otherKey    int // key-signed by a key not configured
	badSig      int // by a configured key, but the signature does not verify
	otherDigest int // a signature of another digest
	keyless     int // keyless, and no identities configured
	keyed       int // key-signed, and no keys configured
	otherID     int // keyless by an identity not allowed, or not verifying
	noTlog      int // no transparency log entry, and one is required
	invalid     int // not a bundle tend can read
	attestation int // an attestation (another predicate type), not a signature
	// unread counts the bundle referrers over the bounds, not read.
	unread  int
	lastErr string
}

// found says what was found, e.g. "found 1 signature by another key".
func (t tally) found() string {
	var parts []string
	add := func(n int, what string) {
		if n == 1 {
			parts = append(parts, "1 signature "+what)
		} else if n > 1 {
			parts = append(parts, fmt.Sprintf("%d signatures %s", n, what))
		}
	}
	add(t.otherKey, "by another key")
	add(t.badSig, "by a listed key that does not verify (tampered?)")
	add(t.otherDigest, "of another digest")
	add(t.keyless, "made keyless (list identities and a trustedRoot to accept them)")
	add(t.keyed, "made with a key (list keys to accept them)")
	add(t.otherID, "by another identity or not verifying against the trusted root")
	add(t.noTlog, "without a transparency log entry")
	add(t.invalid, "that tend cannot read")
	if t.attestation == 1 {
		parts = append(parts, "1 attestation, which is no signature")
	} else if t.attestation > 1 {
		parts = append(parts, fmt.Sprintf("%d attestations, which are no signatures", t.attestation))
	}
	s := "found no cosign signature of this digest"
	if len(parts) > 0 {
		s = "found " + strings.Join(parts, ", ")
	}
	if t.lastErr != "" && (t.otherID > 0 || t.invalid > 0 || t.badSig > 0) {
		s += ": " + t.lastErr
	}
	if t.unread > 0 {
		s += fmt.Sprintf("; %d more Sigstore bundle referrers not read: over tend's bound of %d referrers (%d signatures) per digest", t.unread, verify.MaxReferrers, verify.MaxSignatures)
	}
	return s
}

// digestBytes is the binary sha256 of a sha256:HEX digest.
func digestBytes(digest string) []byte {
	b, _ := hex.DecodeString(strings.TrimPrefix(digest, "sha256:"))
	return b
}

// parseBundle reads a Sigstore bundle (JSON, v0.1 to v0.3).
func parseBundle(raw []byte) (*bundle.Bundle, error) {
	var b bundle.Bundle
	if err := b.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("not a Sigstore bundle: %w", err)
	}
	return &b, nil
}

// errAttestation is a bundle whose in-toto statement is an attestation
// (cosign attest: an SBOM, a provenance), not cosign's signature.
var errAttestation = errors.New("an attestation, not a signature")

// signs reports whether b, a bundle, signs digest: the subject of its
// in-toto statement (cosign v3's DSSE, whose predicate type must be
// SignPredicateType; another is errAttestation) or its message digest.
func signs(b sgverify.SignedEntity, digest string) (bool, error) {
	sc, err := b.SignatureContent()
	if err != nil {
		return false, err
	}
	want := strings.TrimPrefix(digest, "sha256:")
	if env := sc.EnvelopeContent(); env != nil {
		st, err := env.Statement()
		if err != nil {
			return false, err
		}
		if st.GetPredicateType() != verify.SignPredicateType {
			return false, errAttestation
		}
		for _, s := range st.GetSubject() {
			if s.GetDigest()["sha256"] == want {
				return true, nil
			}
		}
		return false, nil
	}
	if m := sc.MessageSignatureContent(); m != nil {
		return strings.EqualFold(m.DigestAlgorithm(), "SHA2_256") && hex.EncodeToString(m.Digest()) == want, nil
	}
	return false, nil
}

// checkBundle verifies raw, a bundle, against p for digest: true when it
// satisfies p; otherwise t counts why not.
func (p *policy) checkBundle(raw []byte, digest string, t *tally) bool {
	b, err := parseBundle(raw)
	if err != nil {
		t.invalid++
		t.lastErr = err.Error()
		return false
	}
	return p.check(b, digest, t)
}

// check verifies b, a bundle read, against p for digest.
func (p *policy) check(b sgverify.SignedEntity, digest string, t *tally) bool {
	if ok, err := signs(b, digest); errors.Is(err, errAttestation) {
		t.attestation++
		return false
	} else if err != nil {
		t.invalid++
		t.lastErr = err.Error()
		return false
	} else if !ok {
		t.otherDigest++
		return false
	}
	vc, err := b.VerificationContent()
	if err != nil {
		t.invalid++
		t.lastErr = err.Error()
		return false
	}
	artifact := sgverify.WithArtifactDigest("sha256", digestBytes(digest))
	switch {
	case vc.PublicKey() != nil:
		if len(p.keys) == 0 {
			t.keyed++
			return false
		}
		if p.block.TLogIsRequired() && !b.HasInclusionProof() && !b.HasInclusionPromise() {
			t.noTlog++
			return false
		}
		hint := vc.PublicKey().Hint()
		for _, k := range p.keys {
			v, err := p.keyVerifier(k)
			if err != nil {
				t.invalid++
				t.lastErr = err.Error()
				return false
			}
			if _, err := v.Verify(b, sgverify.NewPolicy(artifact, sgverify.WithKey())); err == nil {
				return true
			} else if hint == k.hint {
				t.badSig++
				t.lastErr = err.Error()
				return false
			}
		}
		t.otherKey++
		return false
	case vc.Certificate() != nil:
		if len(p.identities) == 0 {
			t.keyless++
			return false
		}
		if p.block.TLogIsRequired() && !b.HasInclusionProof() && !b.HasInclusionPromise() {
			t.noTlog++
			return false
		}
		v, err := p.keylessVerifier()
		if err != nil {
			t.invalid++
			t.lastErr = err.Error()
			return false
		}
		var opts []sgverify.PolicyOption
		for _, id := range p.identities {
			opts = append(opts, sgverify.WithCertificateIdentity(id))
		}
		if _, err := v.Verify(b, sgverify.NewPolicy(artifact, opts...)); err != nil {
			t.otherID++
			t.lastErr = err.Error()
			return false
		}
		return true
	}
	t.invalid++
	return false
}

// keyVerifier is a sigstore-go verifier that trusts k alone, and the
// trusted root's transparency logs when a log entry is required.
func (p *policy) keyVerifier(k key) (*sgverify.Verifier, error) {
	km := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		return root.NewExpiringKey(k.verifier, time.Time{}, time.Time{}), nil
	})
	if !p.block.TLogIsRequired() {
		return sgverify.NewVerifier(km, sgverify.WithNoObserverTimestamps())
	}
	return sgverify.NewVerifier(root.TrustedMaterialCollection{p.trusted, km},
		sgverify.WithTransparencyLog(1), sgverify.WithIntegratedTimestamps(1))
}

// keylessVerifier is a sigstore-go verifier of certificates issued by the
// trusted root's authorities, timestamped by its log or its timestamp
// authorities, with their certificate transparency proofs where the root
// lists CT logs.
func (p *policy) keylessVerifier() (*sgverify.Verifier, error) {
	var opts []sgverify.VerifierOption
	if p.block.TLogIsRequired() {
		opts = append(opts, sgverify.WithTransparencyLog(1), sgverify.WithIntegratedTimestamps(1))
	} else {
		opts = append(opts, sgverify.WithObserverTimestamps(1))
	}
	if len(p.trusted.CTLogs()) > 0 {
		opts = append(opts, sgverify.WithSignedCertificateTimestamps(1))
	}
	return sgverify.NewVerifier(p.trusted, opts...)
}
