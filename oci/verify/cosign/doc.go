// Package cosign is verify's checker of cosign signatures, with
// sigstore-go: it reads a cosign block's public keys and Sigstore trusted
// root, and verifies the Sigstore bundles (and the signatures in cosign's
// legacy sha256-HEX.sig format, key-based only) that package verify
// looks up for a digest, offline, saying what it found when none
// satisfies the block. It registers itself with package verify when
// imported; cmd/tend imports it from feature_cosign.go, which the build
// tag tend_omit_cosign leaves out. In the flow of DESIGN.md it sits
// beside oci, as verify does.
package cosign
