// Package service is the applier's driver for services: it starts each
// replica of a service on the runtime of its kind, updates only the
// replicas whose spec changed, scales by the difference, checks that a
// started replica stays up and becomes healthy (or fails the action, which
// rolls the plan back), and stops what is no longer declared.
//
// Runtimes are plugins: a runtime's package registers a Factory for its
// kind (Register, as database/sql drivers do) and the driver and the
// Supervisor look the runtime up by the kind of a rendered service or of
// a record. A runtime makes and decodes its own Spec and hands back a
// Handle only it understands (Nomad's task handles are the model); the
// Supervisor keeps both in a record in stateDir, and after an agent
// restart gets the handle back through Runtime.Recover, so the next agent
// adopts what runs instead of restarting it. While the agent runs it
// restarts an instance that exits as its restart policy says, with
// crash-loop backoff, and restarts one whose health probe fails. What only
// some runtimes do (find orphans, check and fetch before a plan, pin
// images, clean up after one, keep logs) are optional interfaces a runtime
// implements. service/process runs processes; service/container runs
// containers. Health probes and the log files of runtimes that do not
// keep their own live here, for every runtime.
package service
