// Package diff computes, from Git alone, what merging a change does to every
// device of a fleet: tend diff and tend validate --all, for CI.
//
// It is a top-level package because it spans the stages before the node
// (source, manifest, render, rollout, planner) without one.
//
// It reads two revisions with go-git (as gitsource does), finds the devices
// in them by the path or branch pattern of the agent config, renders each
// device that changed with manifest and render (no node, no applier), and
// plans head against base-as-observed with the pure planner. A device whose
// folder has the same Git tree at both revisions is counted without reading
// its files, so the cost is linear in the devices that change, not in the
// size of the fleet.
package diff
