// Package e2e holds the end-to-end suites of tend: its TestMain builds
// the tend binary of cmd/tend (and tend-hub) once, and the tests run it as
// a device or a CI job runs it, against real Git repositories, registries,
// services, brokers and hubs started in temp folders; the benchmarks of
// make bench and the release's tests (make release on a copy of the tree,
// go install, the version stamps) are here too. It has no code of its own
// and is no part of tend's flow. With -short the whole package is
// skipped: make test runs it, make test-short runs the unit tests of
// cmd/tend and of every other package.
package e2e
