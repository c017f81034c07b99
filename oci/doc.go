// Package oci resolves model artifacts in OCI registries: a tag to the
// digest of its manifest, or a semver policy to the highest matching tag.
//
// In the flow of DESIGN.md it serves the planner's desired state for models
// (what digest should be active) without downloading anything; the blob
// store and the model driver build on it.
package oci
