// Package transport reaches OCI registries as tend does: one
// authenticated session per repository, shared for a minute by the
// requests of a tick; every request bounded by a timeout of silence and,
// with downloads.maxRate, its body read through one token bucket per
// process; credentials from registries.dockerConfig; registry errors
// told apart (not found, with the closest tags; refused credentials; out
// of reach, saying what to check); and a model ref resolved to the
// digest of its manifest (a tag with one HEAD request, or a semver
// policy to the highest matching tag). In the flow of DESIGN.md, render
// resolves refs through it, and the other oci packages, the OCI source
// and the signature checks of oci/verify send their requests through it.
package transport
