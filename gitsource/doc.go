// Package gitsource fetches the fleet repo and reads one device's manifests
// from a commit. It is the first step of a reconcile in DESIGN.md (gitsource
// → manifest → planner → applier): Fetch resolves the configured ref against
// the remote's advertised refs, fetches into one persistent bare clone only
// when the commit is not already there, and returns every *.yaml/*.yml file
// under the device's path, read straight from the commit's tree with no
// checkout. The Snapshot's Revision is what the agent records as applied and
// compares on the next tick. Callers serialise Fetch calls on one clone
// folder (the agent's state lock does).
package gitsource
