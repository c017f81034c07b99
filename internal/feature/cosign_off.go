//go:build tend_omit_cosign

package feature

const cosign = false
