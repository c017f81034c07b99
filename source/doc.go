// Package source names what the first stage of DESIGN.md's flow (source ──▶
// manifest) hands on, whichever source it came from: the Revision a device
// follows (REF@sha1:COMMIT), the Snapshot of one device's manifest files at
// that revision, the errors that say why a target was refused, and the one
// Fetcher interface that gitsource (a Git repo) and ocisource (the repo
// published as an OCI artifact) implement. It is a top-level package of its
// own so that the tick talks to one interface (only the agent's
// constructor of its fetcher names the two sources) and later stages know
// neither.
package source
