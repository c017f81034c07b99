// Package drift owns drift: a difference between the node and what tend
// last applied, made on the node while the declaration in Git stayed the
// same.
//
// In the flow of DESIGN.md it sits after the planner: the planner marks the
// actions that revert drift (planner.Action.Drift says what changed), Detect
// turns them into events by resource kind, and a Tracker follows them from
// tick to tick: drift seen on tick after tick (while suspended, or while
// reverting it fails) is one event, open until a tick reverts it or it is
// gone. The agent logs, counts and reports what the Tracker says. The next
// apply reverts drift (level-based, not edge-triggered).
package drift
