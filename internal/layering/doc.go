// Package layering holds the test that keeps tend's import graph as
// DESIGN.md draws it: each stage imports only the stages before it and the
// shared vocabulary, the CI commands' packages never reach a node's, and
// no production package imports a test helper. It has no code of its own.
package layering
