// Package model is the applier's driver for models pulled from OCI
// registries. It resolves a model's ref to a digest for render (one HEAD
// per tick; a registry that cannot be asked holds the model at its active
// version), pulls the blobs a version lacks into the blob store,
// materialises the version as a read-only folder in stateDir/models/NAME,
// and activates it by swapping the model's stable path, a symlink, to it.
// Pulling (Prepare) is split from activation (Apply), so the applier pulls
// every model before it touches anything. It observes drift in an active
// version's files by their stat fingerprints (and re-hashes them every
// verifyInterval), keeps keepVersions older versions for rollback, and
// collects versions and blobs nothing keeps once a plan succeeded.
package model
