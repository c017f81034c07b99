// Package testpg starts a real PostgreSQL server for a test, in a
// temporary data directory, as an unprivileged user when the test runs as
// root (postgres refuses root). It is test support, not part of tend's
// flow.
package testpg
