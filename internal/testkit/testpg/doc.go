// Package testpg starts a real PostgreSQL server for tests, in a
// temporary data directory, as an unprivileged user when the test runs as
// root (postgres refuses root): a server per test (Start,
// StartWithPassword), or one per test binary with a fresh database per
// test (Database, with Main in the package's TestMain). With -short its
// tests are skipped. It is test support, not part of tend's flow.
package testpg
