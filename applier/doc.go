// Package applier observes the node and executes a plan on it, through the
// drivers it is handed, one per resource kind.
//
// In the flow of DESIGN.md the applier is both ends of the planner: before
// planning, Observe asks each driver what is on the node for every desired
// or managed resource; after planning, Apply runs the Changeset's actions in
// order, stopping at the first error, and rolls the plan back when a
// running resource (a service) does not come up. It never reaches into a
// driver: optional work is asked for through small interfaces (Preparer,
// Finisher, Undoer, Downloader, Runner, Describer, and Forgetter, which
// Begin asks at the start of every tick since drivers live from one tick
// to the next). The drivers live in packages of
// their own: applier/file, applier/model and applier/service.
//
// The applier keeps the inventory of what tend applied in stateDir, so only
// resources tend created are ever pruned, the lock so two tends never apply
// at once, and the quarantine of commits rolled back on this node. The
// commands that change the stateDir outside a reconcile lock it as one
// (Retry for tend retry, RestoreState for tend state restore: the stateDir
// lock, and the agent lock where no agent may run or while MigrateState
// brings an older stateDir to this tend's format).
package applier
