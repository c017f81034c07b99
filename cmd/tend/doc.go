// Command tend keeps a device at the state declared for it in Git.
//
// It is the thin top of the flow in DESIGN.md: each subcommand lives in its
// own file and only turns flags into a call to a package (agent for the
// reconcile and the loop, config for the agent config, diff and
// diff/validate for the CI commands, applier for the stateDir's locks,
// planner for output formats). internal/layering holds it to that: no
// function here is over 40 lines, and the files of the CI commands import
// no node's package.
package main
