// Package ocisource publishes the fleet repo as an OCI artifact and reads
// one device's manifests from such an artifact. It is the other
// implementation of source.Fetcher, beside gitsource, for the first stage
// of DESIGN.md's flow (source ──▶ manifest): a device whose source.url is
// oci://HOST/REPO:TAG polls with one manifest HEAD, downloads and unpacks
// the artifact's one layer only when the digest changed, and hands the
// agent the same source.Snapshot a Git fetch does, named by the artifact's
// revision annotation (REF@sha1:COMMIT), so everything after the source is
// the same for both. Publish, run in CI by tend publish, pushes the tree of
// a commit in Flux's artifact format, reproducibly; artifacts pushed by
// flux push artifact are read too.
package ocisource
