// Command tend keeps a device at the state declared for it in Git.
//
// It is the thin top of the flow in DESIGN.md: each subcommand lives in its
// own file and only turns flags into a call to a package (agent for the
// reconcile and the loop, planner for output formats, manifest for config).
package main
