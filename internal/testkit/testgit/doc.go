// Package testgit makes real Git repositories and serves them for tests; it is
// test support, not part of tend's flow. Repositories are made with the git
// command line in t.TempDir(), isolated from the user's Git configuration, and
// served over smart HTTP by the real git http-backend through net/http/cgi
// (plain, or TLS with a CA made for the test and optional basic or token
// auth), or over ssh by a real OpenSSH sshd, so tests of gitsource, the agent
// and the CLI exercise the same protocols a fleet repo on a Git server speaks.
package testgit
