// Package layering holds the tests that keep the code as DESIGN.md draws
// it: each stage imports only the stages before it and the shared
// vocabulary, the CI commands' packages never reach a node's, the wire
// types (api) link the standard library only and the hub and its client
// reach no node's package, no production package imports a test helper,
// and a package comment that draws the flow draws a piece of DESIGN.md's. It has no code of its own.
package layering
