// Package testgit makes real Git repositories and serves them for tests; it is
// test support, not part of tend's flow. Repositories are made with the git
// command line in t.TempDir(), isolated from the user's Git configuration, and
// served over smart HTTP by the real git http-backend through net/http/cgi, so
// tests of gitsource, the agent and the CLI exercise the same protocol a fleet
// repo on a Git server speaks.
package testgit
