// Package applier observes the node and executes a plan on it.
//
// In the flow of tend (gitsource → manifest → planner ← observe → applier)
// the applier is both ends of the planner: its drivers, one per resource
// kind, report what is really on the node, and after planning it executes
// the Changeset's actions in order, stopping at the first error. It keeps
// the inventory of what tend applied in stateDir, so only resources tend
// created are ever pruned, and a lock so two tends never apply at once.
// Files have a driver here; models and services get theirs in later work.
// Every managed path is confined to the configured allowPaths under root,
// with no way out through ".." or a symlink.
package applier
