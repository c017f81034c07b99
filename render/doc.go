// Package render turns a device's manifests into its desired state: the
// resources the planner compares (planner.Desired) and, for each, the spec
// its driver applies. Model refs are pinned to digests through a Resolver
// (the model driver on a device, a registry or the declaration alone in
// CI), service specs are expanded (${model:…}, ${file:…}, ${replica}) and
// hashed, and every path is checked against allowPaths.
//
// It is a top-level package because it is a stage of the flow of
// DESIGN.md, between manifest (parse and validate) and the planner, and it
// needs no node: `tend diff` renders
// every device of a fleet in CI with it, and the agent renders its own
// device with the same code before it observes anything.
package render
