// Package planner computes the smallest set of actions that takes a device
// from what is observed on it to what is declared for it in Git.
//
// In DESIGN.md's flow (source → manifest → render → rollout → observe →
// planner → applier → status) the planner is the pure middle: Plan takes
// the desired resources (from render) and the observed ones (from the
// applier's drivers, with the inventory of what tend applied last) and
// returns a Changeset. It does no I/O, reads no clock and draws no random
// numbers, so the same planner runs on a device and in CI. Its types
// (Desired, Observed, Action) are the vocabulary render and the applier
// share.
package planner
