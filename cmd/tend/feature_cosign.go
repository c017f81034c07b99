//go:build !tend_omit_cosign

package main

// cosign verification (a verify block's cosign), which registers itself
// with package verify; tend_omit_cosign leaves it and sigstore out.
import _ "github.com/tend-dev/tend/oci/verify/cosign"
