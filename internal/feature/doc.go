// Package feature names the parts of tend that a build tag leaves out of
// the binary (the container runtime, Notation and cosign verification,
// MQTT notify), whether this build has each, and the error a config or
// manifest that asks for a missing one fails with. It imports nothing of
// tend: manifest's validation asks it, at the edge of the flow of
// DESIGN.md, so that such a config fails `tend validate` and agent start
// naming the tag, not a tick later with a nil hook. The implementations
// register themselves with the package that calls them (service's
// runtimes, verify's signature checkers, notify's transport) from
// cmd/tend's feature_*.go files, which the same tags leave out.
package feature
