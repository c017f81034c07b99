//go:build !tend_omit_notation

package main

// Notation verification (a verify block's notation), which registers
// itself with package verify; tend_omit_notation leaves it and
// notation-go out.
import _ "github.com/tend-dev/tend/oci/verify/notation"
