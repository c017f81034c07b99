// Package planner computes the smallest set of actions that takes a device
// from what is observed on it to what is declared for it in Git.
//
// In the flow of tend (gitsource → manifest → planner ← observe → applier)
// the planner is the pure middle: Plan takes the desired resources and the
// observed ones (plus the inventory of what tend applied last) and returns a
// Changeset. It does no I/O, reads no clock and draws no random numbers, so
// the same planner runs on a device and in CI.
package planner
