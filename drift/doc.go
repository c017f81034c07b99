// Package drift classifies and records drift: a difference between the node
// and what tend last applied, made on the node while the declaration in Git
// stayed the same.
//
// In the flow of DESIGN.md it sits after the planner: the planner marks the
// actions that revert drift, and drift turns them into events by resource
// kind, which the agent logs, counts and reports. The next apply reverts
// them (level-based, not edge-triggered).
package drift
