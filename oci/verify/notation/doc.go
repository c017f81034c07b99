// Package notation is verify's checker of Notation signatures, with
// notation-go: it verifies the Notation signatures attached to a digest
// (application/vnd.cncf.notary.signature referrers) against a trust policy
// file and a trust store folder (x509/ca/NAME/*.crt), offline, running no
// plugin. It registers itself with package verify when imported; cmd/tend
// imports it from feature_notation.go, which the build tag
// tend_omit_notation leaves out. In the flow of DESIGN.md it sits beside
// oci, as verify does.
package notation
