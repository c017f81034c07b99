// Package testdocker runs a private Docker Engine (Debian's dockerd) for a
// test package, and builds test images FROM scratch around a static Go
// program and pushes them to a test registry (internal/testkit/testoci), from which
// the engine pulls them: the machine has no internet. BuildProgram and
// PushImage take no testing.TB: examples/registry uses them to push the
// image of `make demo-containers`.
//
// One engine serves a whole test binary: the package's TestMain calls Main,
// and the first test that calls Host starts the engine (a few seconds);
// Main stops it and removes its folders when the tests end. Without
// dockerd, or without root to run it, Host skips the test with the reason,
// except in CI (CI set in the environment), where .ci/run installs
// docker.io and its absence is a failure.
package testdocker
