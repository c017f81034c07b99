// Package verify checks that an artifact a registry serves (the OCI fleet
// artifact, a model, a container image) carries the signatures a verify
// block asks for, offline, before tend uses it: given a repository and a
// manifest digest, it finds the cosign signatures attached to the digest
// (Sigstore bundles as OCI 1.1 referrers, through the referrers API or
// the referrers tag schema, and cosign's legacy sha256-HEX.sig tag) and
// has the cosign checker verify them against the configured public keys,
// or keyless against a Sigstore trusted root and the allowed identities;
// and it has the Notation checker verify Notation signatures against a
// trust policy and trust store. The checkers, with sigstore-go and
// notation-go, are the packages oci/verify/cosign and oci/verify/notation,
// which register themselves (RegisterCosign, RegisterNotation) when
// cmd/tend imports them: a tend built with tend_omit_cosign or
// tend_omit_notation links neither library, and a requirement it cannot
// check fails naming the tag.
//
// Everything the registry sends is bounded in bytes and count before it is
// read; attestations are no signatures, and do not count against the
// signatures read. A digest verified against the same requirements is remembered, so
// a tick that finds nothing new sends no request.
//
// In the flow of DESIGN.md it sits beside oci: ocisource checks the fleet
// artifact with it, and the appliers of models and containers check what
// they are about to stage.
package verify
