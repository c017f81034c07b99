// Package oci talks to OCI registries and keeps what it pulls: it resolves
// a model ref to the digest of its manifest (a tag with one HEAD request,
// or a semver policy to the highest matching tag), reads an artifact's
// manifests into the layouts tend understands (ORAS, tar layers, KitOps,
// ModelPack, indexes by platform), and keeps blobs in a content-addressed
// store in stateDir that verifies every byte, resumes interrupted
// downloads and materialises versions from hard links.
//
// In the flow of DESIGN.md, render resolves refs through it (in CI with no
// store at all, see Inspect), and the model driver pulls and materialises
// with its Store.
package oci
