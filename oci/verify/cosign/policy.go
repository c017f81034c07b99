package cosign

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/sigstore/sigstore-go/pkg/root"
	sgverify "github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/tend-dev/tend/manifest"
	"github.com/tend-dev/tend/oci/verify"
)

// policy is one verify block's cosign requirement, its files read.
type policy struct {
	block *manifest.CosignVerify
	keys  []key
	// identities and trusted are set for keyless signers.
	identities []sgverify.CertificateIdentity
	trusted    root.TrustedMaterial
}

// key is a configured public key.
type key struct {
	path     string
	verifier signature.Verifier
	// hint is how cosign names the key in a bundle: the base64 SHA-256
	// of its DER encoding.
	hint string
}

// loadPolicy reads the files of a cosign block and returns its policy.
func loadPolicy(c *manifest.CosignVerify) (*policy, error) {
	p := &policy{block: c}
	for _, path := range c.Keys {
		b, err := verify.ReadFile(path, verify.MaxKeyFile, "cosign public key")
		if err != nil {
			return nil, err
		}
		k, err := parseKey(path, b)
		if err != nil {
			return nil, err
		}
		p.keys = append(p.keys, k)
	}
	if c.TrustedRoot != "" {
		b, err := verify.ReadFile(c.TrustedRoot, verify.MaxTrustedRootFile, "Sigstore trusted root")
		if err != nil {
			return nil, err
		}
		tr, err := root.NewTrustedRootFromJSON(b)
		if err != nil {
			return nil, fmt.Errorf("trusted root %s: %w; fetch it again (cosign trusted-root create, or the TUF repository's trusted_root.json)", c.TrustedRoot, err)
		}
		p.trusted = tr
	}
	for _, id := range c.Identities {
		ci, err := sgverify.NewShortCertificateIdentity(id.Issuer, "", "", id.SubjectRegExp)
		if err != nil {
			return nil, fmt.Errorf("cosign identity issuer %q subjectRegExp %q: %w", id.Issuer, id.SubjectRegExp, err)
		}
		p.identities = append(p.identities, ci)
	}
	return p, nil
}

// parseKey reads a PEM public key as cosign generate-key-pair writes it.
func parseKey(path string, pemBytes []byte) (key, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemBytes)
	if err != nil {
		return key{}, fmt.Errorf("cosign public key %s: %w; it must be a PEM public key, as cosign generate-key-pair writes cosign.pub", path, err)
	}
	v, err := signature.LoadDefaultVerifier(pub)
	if err != nil {
		return key{}, fmt.Errorf("cosign public key %s: %w", path, err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return key{}, fmt.Errorf("cosign public key %s: %w", path, err)
	}
	sum := sha256.Sum256(der)
	return key{path: path, verifier: v, hint: base64.StdEncoding.EncodeToString(sum[:])}, nil
}

// describe is the requirement in words: "cosign signature by
// /etc/tend/cosign.pub", "… by one of /a.pub, /b.pub or issuer … subject
// matching …".
func (p *policy) describe() string {
	var by []string
	by = append(by, p.block.Keys...)
	for _, id := range p.block.Identities {
		by = append(by, fmt.Sprintf("issuer %s subject matching %s", id.Issuer, id.SubjectRegExp))
	}
	s := "cosign signature by "
	if len(by) > 1 {
		s += "one of "
	}
	s += strings.Join(by, ", ")
	if p.block.TLogIsRequired() {
		s += " with a transparency log entry"
	}
	return s
}

// fix says what to do about an unsigned t.
func (p *policy) fix(t verify.Target) string {
	if len(p.keys) > 0 {
		return fmt.Sprintf("sign it (cosign sign --key cosign.key %s@%s) with the key whose public half is listed, or hold this release", t.Repository, t.Digest)
	}
	return fmt.Sprintf("sign it keyless (cosign sign %s@%s) as a listed identity, or hold this release", t.Repository, t.Digest)
}
