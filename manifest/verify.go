package manifest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/tend-dev/tend/internal/feature"
)

// ArtifactVerify says which signatures a published artifact (the OCI
// fleet artifact, a model, a container image) must carry before tend uses
// it: a cosign signature that satisfies Cosign, and a Notation signature
// that satisfies Notation, each when set. Every path is on the node.
type ArtifactVerify struct {
	Cosign   *CosignVerify   `json:"cosign,omitempty"`
	Notation *NotationVerify `json:"notation,omitempty"`
}

// CosignVerify accepts a cosign signature made by one of Keys (key-based)
// or, keyless, by a certificate of TrustedRoot's certificate authority
// issued to one of Identities. Any one key or identity suffices, so a key
// is rotated by listing the new one beside the old, then removing the old.
type CosignVerify struct {
	// Keys are PEM public keys (cosign.pub), absolute paths.
	Keys []string `json:"keys,omitempty"`
	// Identities are the keyless signers accepted: the OIDC issuer and a
	// regular expression the certificate's subject (SAN) must match.
	Identities []CosignIdentity `json:"identities,omitempty"`
	// TrustedRoot is a Sigstore trusted root (trusted_root.json: the
	// certificate authorities, transparency logs and timestamp
	// authorities), read offline; required with identities.
	TrustedRoot string `json:"trustedRoot,omitempty"`
	// TLog says whether a signature must carry a transparency log
	// inclusion proof: required (the default with identities) or optional
	// (the default with keys alone).
	TLog string `json:"tlog,omitempty" jsonschema:"enum=required,enum=optional"`
}

// CosignIdentity is a keyless signer: the issuer of its OIDC token and its
// certificate's subject.
type CosignIdentity struct {
	Issuer        string `json:"issuer" jsonschema:"required"`
	SubjectRegExp string `json:"subjectRegExp" jsonschema:"required"`
}

// NotationVerify accepts a Notation signature allowed by a trust policy
// file and the certificates of a trust store folder.
type NotationVerify struct {
	TrustPolicy string `json:"trustPolicy" jsonschema:"required"`
	TrustStore  string `json:"trustStore" jsonschema:"required"`
}

// TLog values.
const (
	TLogRequired = "required"
	TLogOptional = "optional"
)

// TLogIsRequired reports whether a signature must carry a transparency log
// entry: tlog: required, or identities without tlog set.
func (c *CosignVerify) TLogIsRequired() bool {
	if c.TLog != "" {
		return c.TLog == TLogRequired
	}
	return len(c.Identities) > 0
}

// problem is one thing wrong in a verify block: the field under it and
// what to do.
type problem struct{ field, msg string }

// problems returns what is wrong with v, fields relative to the block.
func (v *ArtifactVerify) problems() []problem {
	var ps []problem
	add := func(field, format string, args ...any) {
		ps = append(ps, problem{field, fmt.Sprintf(format, args...)})
	}
	if v.Cosign == nil && v.Notation == nil {
		add("", "names no signer: set cosign (keys, or identities with a trustedRoot) or notation (trustPolicy and trustStore), or remove verify")
	}
	if c := v.Cosign; c != nil {
		if err := feature.Cosign.Check(); err != nil {
			add(".cosign", "%v", err)
		}
		if len(c.Keys) == 0 && len(c.Identities) == 0 {
			add(".cosign", "names no signer: set keys (PEM public keys, as cosign generate-key-pair writes cosign.pub) or identities with a trustedRoot")
		}
		for i, k := range c.Keys {
			if !filepath.IsAbs(k) {
				add(fmt.Sprintf(".cosign.keys[%d]", i), "%q must be the absolute path of a PEM public key (cosign.pub)", k)
			} else if first := slices.Index(c.Keys, k); first < i {
				add(fmt.Sprintf(".cosign.keys[%d]", i), "%q is keys[%d] too: list a key once", k, first)
			}
		}
		for i, id := range c.Identities {
			f := fmt.Sprintf(".cosign.identities[%d]", i)
			if id.Issuer == "" {
				add(f+".issuer", "missing: the OIDC issuer of the signer, e.g. https://token.actions.githubusercontent.com")
			}
			if id.SubjectRegExp == "" {
				add(f+".subjectRegExp", "missing: a regular expression the certificate's subject must match, e.g. ^https://github.com/acme/fleet/")
			} else if _, err := regexp.Compile(id.SubjectRegExp); err != nil {
				add(f+".subjectRegExp", "%q is not a regular expression: %v", id.SubjectRegExp, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			}
		}
		switch {
		case len(c.Identities) > 0 && c.TrustedRoot == "":
			add(".cosign.trustedRoot", "missing: identities are checked against a Sigstore trusted root; set trustedRoot to the absolute path of a trusted_root.json")
		case c.TrustedRoot != "" && !filepath.IsAbs(c.TrustedRoot):
			add(".cosign.trustedRoot", "%q must be the absolute path of a Sigstore trusted_root.json", c.TrustedRoot)
		case c.TrustedRoot != "" && len(c.Identities) == 0 && c.TLog != TLogRequired:
			add(".cosign.trustedRoot", "is set but unused: a trusted root checks keyless identities and transparency log entries; list identities or set tlog: required, or remove trustedRoot")
		}
		switch {
		case c.TLog != "" && c.TLog != TLogRequired && c.TLog != TLogOptional:
			add(".cosign.tlog", "%q is not required or optional", c.TLog)
		case c.TLog == TLogRequired && c.TrustedRoot == "":
			add(".cosign.tlog", "required needs the transparency log's key: set trustedRoot to a Sigstore trusted_root.json, or use tlog: optional")
		}
	}
	if n := v.Notation; n != nil {
		if err := feature.Notation.Check(); err != nil {
			add(".notation", "%v", err)
		}
		if !filepath.IsAbs(n.TrustPolicy) {
			add(".notation.trustPolicy", "%q must be the absolute path of a Notation trustpolicy.json", n.TrustPolicy)
		}
		if !filepath.IsAbs(n.TrustStore) {
			add(".notation.trustStore", "%q must be the absolute path of a Notation trust store folder (holding x509/ca/NAME/*.crt)", n.TrustStore)
		}
	}
	return ps
}

// Requirements returns the verify blocks an artifact must satisfy, every
// one: the node's and the manifest's own, either of which may be nil. A
// manifest's verify so only adds requirements, never removes the node's.
func Requirements(node, own *ArtifactVerify) []*ArtifactVerify {
	var all []*ArtifactVerify
	for _, x := range []*ArtifactVerify{node, own} {
		if x != nil {
			all = append(all, x)
		}
	}
	return all
}

// checkSourceVerify checks source.verify: commit signers of a Git source,
// artifact signers of an oci:// one (checkOCI refuses commit signers
// there).
func (c *AgentConfig) checkSourceVerify(v *Verify, errs *Errors) {
	if a := v.Artifact(); a != nil {
		if !IsOCI(c.Source.URL) {
			errs.add("", 0, "source.verify", "cosign and notation check a published artifact, and source.url %q is a Git repo: verify its commits with keyring or ssh.allowedSigners, or publish the fleet (tend publish) and use oci://", c.Source.URL)
		}
		for _, p := range a.problems() {
			errs.add("", 0, "source.verify"+p.field, "%s", p.msg)
		}
		return
	}
	switch {
	case v.Keyring == "" && v.SSH == nil:
		errs.add("", 0, "source.verify", "names no signer: set keyring (a file of armored OpenPGP public keys) or ssh.allowedSigners (an allowed signers file, as git's gpg.ssh.allowedSignersFile), or both; of an oci:// source, cosign or notation")
	case v.Keyring != "" && !filepath.IsAbs(v.Keyring):
		errs.add("", 0, "source.verify.keyring", "%q must be the absolute path of a file of armored OpenPGP public keys", v.Keyring)
	}
	if v.SSH != nil && !filepath.IsAbs(v.SSH.AllowedSigners) {
		errs.add("", 0, "source.verify.ssh.allowedSigners", "%q must be the absolute path of an allowed signers file (git's gpg.ssh.allowedSignersFile format)", v.SSH.AllowedSigners)
	}
}
