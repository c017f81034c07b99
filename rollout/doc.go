// Package rollout decides whether a device takes a release now: the step
// between render and the observation of the node in DESIGN.md's flow
// (source → manifest → render → rollout → observe → planner → applier →
// status). Given the Rollout that governs the device, its name and labels,
// when it first saw the release and the time, it says which wave the
// device is in and whether the release is taken or held, and why. It also
// makes, from a Rollout, the question a later wave's device asks the
// brakes' hub (BrakesQuery; the query itself, api.VerdictQuery, is the
// wire's: the agent encodes it, the hub parses it). It is pure: no I/O,
// no clock of its own.
package rollout
